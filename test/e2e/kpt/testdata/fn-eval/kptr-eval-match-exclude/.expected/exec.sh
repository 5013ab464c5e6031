set -eo pipefail
kpt fn eval --exec 'fx op=label key=picked value=yes' --match-namespace prod --exclude-kind Service
