set -eo pipefail
kpt fn eval --exec fx -- MyConfig op=echo
