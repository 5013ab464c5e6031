set -o pipefail
kpt fn render --image-prefix '' --offline 2>&1 | grep -E 'RUNNING|Exit code'
