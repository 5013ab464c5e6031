#!/usr/bin/env bash
# demo.sh [--build LDFLAGS] KPTR OUT [SANDBOX]: what `make demo` does, offline.
# With --build it first builds KPTR from ./cmd/kptr. It builds the example
# function images from test/fixtures into an OCI layout (OUT/demo-images),
# imports them into OUT/demo-cache (never the user's cache), renders a copy of
# examples/demo in OUT/demo, shows the result and what changed, renders it
# again to check that nothing changes, and prints the command that renders it
# once more. Every command it runs is printed first, as "$ COMMAND", shell-quoted
# and exactly as run, so it can be copied and run again from the same directory.
# A step that compiles (minutes on a cold Go cache, seconds after) says so, and
# prints a line every 30 seconds while it runs and how long it took.
set -euo pipefail
ldflags=
if [ "${1:-}" = --build ]; then ldflags=$2; build=1; shift 2; else build=; fi
kptr=$1 out=$2 sandbox=${3:-auto}
go=${GO:-go}
cache=$out/demo-cache images=$out/demo-images pkg=$out/demo again=$out/demo-again

# show prints a command as it would be typed: "$ " and each word shell-quoted.
show() { printf '$'; printf ' %q' "$@"; printf '\n'; }

# run prints a command, then runs it.
run() { show "$@"; "$@"; }

# slow runs a command that may take minutes, printing it, then a line every
# 30 seconds while it runs ("still WHAT"), then how long it took.
slow() {
  local what=$1 start=$SECONDS next=30 pid status=0
  shift
  show "$@"
  "$@" &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if [ $((SECONDS - start)) -ge $next ]; then
      echo "   ... still $what ($((SECONDS - start)) s)"
      next=$((next + 30))
    fi
  done
  wait "$pid" || status=$?
  [ "$status" = 0 ] || { echo "demo: $what failed (exit $status)" >&2; return "$status"; }
  echo "   done in $((SECONDS - start)) s"
}

sandbox_args=()
[ "$sandbox" = auto ] || sandbox_args=(--sandbox "$sandbox")
render=("$kptr" fn render "$pkg" --cache-dir "$cache" --offline "${sandbox_args[@]}")

if [ -n "$build" ]; then
  echo "== building $kptr (the first build downloads kptr's Go modules and compiles them: minutes; later builds take seconds)"
  slow "building $kptr" "$go" build ${BUILD_TAGS:+-tags "$BUILD_TAGS"} -ldflags "$ldflags" -o "$kptr" ./cmd/kptr
fi
echo "== building the example function images from test/fixtures into $images (no daemon, no network;"
echo "   compiles the image builder and three fixture functions: a minute or two the first time)"
slow "building the function images" "$go" run ./examples/build-images -out "$images"
rm -rf "$cache" "$pkg" "$again"
echo "== importing them into $cache (the demo's own cache: yours is never touched)"
run "$kptr" cache import --cache-dir "$cache" "$images"
echo "== copying examples/demo (Kptfile: examples/demo/Kptfile, subpackage examples/demo/db) to $pkg and rendering it offline"
run cp -r examples/demo "$pkg"
run "${render[@]}"
echo "== the rendered package ($pkg), Kptfiles aside:"
(cd "$pkg" && find . -name '*.yaml' | sort) | while read -r f; do echo "--- $f"; cat "$pkg/$f"; done
echo "== what changed:"
diff -ru examples/demo "$pkg" --exclude=Kptfile --exclude=README.md || true
cp -r "$pkg" "$again"
"$kptr" fn render "$again" --cache-dir "$cache" --offline "${sandbox_args[@]}" >/dev/null 2>&1
if diff -r --exclude=Kptfile "$pkg" "$again" >/dev/null; then
  echo "== rendering $pkg again changes no resource (the generator is idempotent)"
else
  echo "== rendering $pkg again changed it:"; diff -ru --exclude=Kptfile "$pkg" "$again"; exit 1
fi
echo "== to render $pkg again (after editing it, say), from this directory:"
show "${render[@]}"
