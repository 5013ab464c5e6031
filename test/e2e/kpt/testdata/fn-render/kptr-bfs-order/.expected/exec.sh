set -eo pipefail
kpt fn render --allow-exec -o unwrap | grep '^  name: '
