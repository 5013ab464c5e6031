set -eo pipefail
# kpt's e2e image-pull-policy-if-not-present retags an image in docker's
# store (docker pull X; docker tag X Y); kptr's cache does the same offline
kptr cache pull gcr.io/kpt-fn/set-labels:v0.1.5 >/dev/null
kptr cache tag gcr.io/kpt-fn/set-labels:v0.1.5 gcr.io/kpt-fn/kptr-fx:v9.9.9
