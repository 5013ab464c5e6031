set -o pipefail
kpt fn render --image-prefix registry.invalid/fns/ --offline 2>&1 | grep -E 'RUNNING|Exit code'
