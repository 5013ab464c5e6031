set -eo pipefail
kpt fn eval --exec fx --fn-config fn-config.yaml
