set -o pipefail
kpt fn eval --image set-labels --image-prefix 'registry.invalid/fns//' --offline -- k=v 2>&1 | grep RUNNING
