#!/bin/sh
# edits only the legacy config.kubernetes.io/path and index of x.yaml's
# resources (not their internal twins): both move to y.yaml, in the opposite
# order; a function written without kyaml's SDK (which would reconcile them
# itself)
awk '
function flush() {
  if (n == 0) return
  mine = 0
  for (i = 1; i <= n; i++) if (buf[i] ~ /^ +config\.kubernetes\.io\/path: .x\.yaml.$/) mine = 1
  for (i = 1; i <= n; i++) {
    l = buf[i]
    if (mine && l ~ /^ +config\.kubernetes\.io\/path: /) sub(/x\.yaml/, "y.yaml", l)
    else if (mine && l ~ /^ +config\.kubernetes\.io\/index: .0.$/) sub(/0/, "1", l)
    else if (mine && l ~ /^ +config\.kubernetes\.io\/index: .1.$/) sub(/1/, "0", l)
    print l
  }
  n = 0
}
/^[^ ]/ { flush() }
{ buf[++n] = $0 }
END { flush() }'
