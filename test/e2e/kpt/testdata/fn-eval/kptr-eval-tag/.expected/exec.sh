set -eo pipefail
kpt fn eval --image gcr.io/kpt-fn/kptr-fx --tag "~0.2" -s -t mutator --match-kind ConfigMap -- op=label key=picked value=yes
kpt fn eval -i gcr.io/kpt-fn/kptr-fx --tag v0.3.0 -s -t mutator --match-kind ConfigMap -- op=count
