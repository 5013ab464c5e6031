set -o pipefail
kpt fn eval --image set-labels --image-prefix '' --offline -- k=v 2>&1 | grep RUNNING
