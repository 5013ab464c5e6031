set -eo pipefail
kpt fn render --allow-exec -o ../rendered-out >/dev/null
cp -r ../rendered-out ./rendered
