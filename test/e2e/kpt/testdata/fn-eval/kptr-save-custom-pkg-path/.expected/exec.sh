set -eo pipefail
kpt fn eval ./sub-pkg -s -t mutator --exec fx --fn-config=./sub-pkg/fn-config.yaml
