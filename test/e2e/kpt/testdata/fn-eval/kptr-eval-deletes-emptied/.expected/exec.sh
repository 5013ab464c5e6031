set -eo pipefail
kpt fn eval --exec 'fx op=delete kind=Service'
