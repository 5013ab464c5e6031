set -eo pipefail
kpt fn source . | kpt fn eval - --exec 'fx op=label key=piped value=yes' | kpt fn sink ../sunk
cp -r ../sunk ./sunk
