set -o pipefail
KPT_IMAGE_PREFIX= kpt fn eval --image set-labels --offline -- k=v 2>&1 | grep RUNNING
