// Command kptr-sigverify is kptr's signature verifier. kptr starts it, from
// beside its own executable or ../libexec/kptr/, when a signature policy
// makes it check a cosign signature, and asks it over standard input and
// output (internal/sigwire) whether each signature verifies with the
// policy's keys. It is a program of its own so that the sigstore libraries
// it links are loaded only by the runs that verify signatures, never at
// every kptr start. It reads nothing but its standard input, writes
// nothing but its standard output, and exits when its input ends.
package main

import (
	"fmt"
	"os"

	"github.com/kptr-dev/kptr/internal/sigverify"
)

func main() {
	if st, err := os.Stdin.Stat(); len(os.Args) > 1 || err != nil || st.Mode()&os.ModeCharDevice != 0 {
		fmt.Fprintln(os.Stderr, "kptr-sigverify: kptr's signature verifier; kptr runs it (with --signature-policy or KPTR_SIGNATURE_POLICY), it takes no arguments")
		os.Exit(2)
	}
	if err := sigverify.Serve(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "kptr-sigverify: %v\n", err)
		os.Exit(1)
	}
}
