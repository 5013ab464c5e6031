set -eo pipefail
pkg=$(basename "$PWD")
cd ..
ln -s "$pkg" lnk
kpt fn eval lnk --exec "fx op=count"
