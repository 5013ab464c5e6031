#!/usr/bin/env bash
# argocd-src.sh VERSION DEST: lay out Argo CD's Go module at VERSION in DEST so
# Go 1.26 builds it. Argo CD v3.6 declares `go 1.27.0` and uses two Go 1.27
# features: encoding/json/v2 (Go 1.26 has it under GOEXPERIMENT=jsonv2) and
# struct literals naming an embedded struct's fields (corev1.Secret{Name: n}),
# which go126.py spells out (ObjectMeta: metav1.ObjectMeta{Name: n}). It also
# replaces its gitops-engine module with ./gitops-engine, a nested module its
# module zip leaves out. Both modules come from the Go module proxy through `go mod
# download`, which checks them against go.sum's database before extracting and
# only then refuses the go line; the copies get `go 1.26.0` and the
# gitops-engine copy goes where the replace expects it. Nothing else changes.
# The line ending `exit 3` on an untracked layout change keeps a later release
# from building silently wrong.
set -euo pipefail
version=$1 dest=$2
modcache=$(go env GOMODCACHE)
fetch() { # module@version -> directory in the module cache
  local dir="$modcache/$(echo "${1%@*}" | sed 's/[A-Z]/!\L&/g')@${1#*@}"
  [ -d "$dir" ] || GOTOOLCHAIN=local GOFLAGS=-mod=mod go mod download "$1" 2>/dev/null || true
  [ -f "$dir/go.mod" ] || { echo "argocd-src: $1 not in the module cache after go mod download" >&2; exit 3; }
  echo "$dir"
}
argocd=$(fetch "github.com/argoproj/argo-cd/v3@$version")
engine=$(fetch "github.com/argoproj/argo-cd/gitops-engine/v3@$version")
rm -rf "$dest.tmp" && mkdir -p "$(dirname "$dest")"
cp -r "$argocd" "$dest.tmp" && chmod -R u+w "$dest.tmp"
rm -rf "$dest.tmp/gitops-engine" && cp -r "$engine" "$dest.tmp/gitops-engine" && chmod -R u+w "$dest.tmp/gitops-engine"
sed -i 's/^go 1\.2[7-9]\(\.[0-9]*\)\?$/go 1.26.0/' "$dest.tmp/go.mod" "$dest.tmp/gitops-engine/go.mod"
grep -q '=> ./gitops-engine$' "$dest.tmp/go.mod" || { echo "argocd-src: $version no longer replaces gitops-engine with ./gitops-engine" >&2; exit 3; }
python3 "$(dirname "$0")/go126.py" "$dest.tmp" >/dev/null
rm -rf "$dest" && mv "$dest.tmp" "$dest"
