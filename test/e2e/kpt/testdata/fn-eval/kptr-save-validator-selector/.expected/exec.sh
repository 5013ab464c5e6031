set -eo pipefail
kpt fn eval -s -t validator --exec "fx op=count" --match-kind ConfigMap --exclude-name skip
