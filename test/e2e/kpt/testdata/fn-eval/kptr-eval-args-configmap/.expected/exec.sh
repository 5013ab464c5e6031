set -eo pipefail
kpt fn eval --exec fx -- op=echo answer=42
