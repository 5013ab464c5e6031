set -eo pipefail
kpt fn eval --image gcr.io/kpt-fn/set-labels:v0.1.5 -- env=prod
# docker image inspect X: is the image in the local store now?
kptr cache ls gcr.io/kpt-fn/set-labels:v0.1.5 >/dev/null
if [[ $? != 0 ]]; then
    echo "ERR: Image could not be found locally and may not have been pulled"
    exit 1
fi
