# kpt's e2e no-image-pull removes the image from docker's store first
# (docker image inspect X && docker image rm X); here the case's cache is
# new, and `kptr cache ls X` must say it is absent (exit code 1)
if kptr cache ls gcr.io/kpt-fn/set-labels:v0.1.5; then exit 1; fi
