#!/usr/bin/env bash
# try-registry.sh KPTR OUT [PORT]: real pulls without the internet, after
# `make demo` (which built the demo's function images into OUT/demo-images).
# It starts Debian's docker-registry on 127.0.0.1:PORT (default 5000) with its
# storage under OUT/registry, pushes the demo's images to it under their
# names without "gcr.io/" (skopeo), and renders a fresh copy of the demo
# package with an empty cache, reaching gcr.io through the registry with
# --mirror, as an air-gapped cluster reaches its own mirror. The registry is
# stopped at the end. Every command is printed before it runs.
set -euo pipefail
kptr=$1 out=$2 port=${3:-5000}
images=$out/demo-images reg=$out/registry pkg=$out/demo-mirror cache=$out/mirror-cache
show() { printf '$'; printf ' %q' "$@"; printf '\n'; }
run() { show "$@"; "$@"; }
for c in docker-registry skopeo; do
  command -v "$c" >/dev/null || { echo "try-registry: $c is not installed (Debian: apt-get install $c)" >&2; exit 3; }
done
[ -f "$images/index.json" ] || { echo "try-registry: no $images: run make demo first" >&2; exit 2; }

rm -rf "$reg" "$pkg" "$cache"
mkdir -p "$reg/data"
cat >"$reg/config.yml" <<CONFIG
version: 0.1
storage:
  filesystem:
    rootdirectory: $(cd "$reg" && pwd)/data
http:
  addr: 127.0.0.1:$port
CONFIG
echo "== starting Debian's docker-registry on 127.0.0.1:$port (storage: $reg/data)"
show docker-registry serve "$reg/config.yml"
docker-registry serve "$reg/config.yml" >"$reg/log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null || true' EXIT
for _ in $(seq 50); do
  if (exec 3<>/dev/tcp/127.0.0.1/"$port") 2>/dev/null; then break; fi
  kill -0 $pid 2>/dev/null || { echo "try-registry: docker-registry did not start:" >&2; cat "$reg/log" >&2; exit 3; }
  sleep 0.1
done

echo "== pushing the demo's images to it"
refs=$(sed -n 's/.*"org.opencontainers.image.ref.name": *"\([^"]*\)".*/\1/p' "$images/index.json" | sort -u)
[ -n "$refs" ] || refs=$(grep -o '"org.opencontainers.image.ref.name":"[^"]*"' "$images/index.json" | cut -d'"' -f4 | sort -u)
for ref in $refs; do
  run skopeo copy --quiet --dest-tls-verify=false "oci:$images:$ref" "docker://127.0.0.1:$port/${ref#gcr.io/}"
done

echo "== rendering a copy of the demo with an empty cache, pulling through the registry"
run cp -r examples/demo "$pkg"
run "$kptr" fn render "$pkg" --cache-dir "$cache" --mirror "gcr.io=127.0.0.1:$port"
echo "== pulled into $cache:"
run "$kptr" cache ls --cache-dir "$cache"
