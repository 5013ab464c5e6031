set -eo pipefail
kpt fn eval -s -t mutator --exec fx -- op=label key=tier value=web
