package pipeline

import (
	"bytes"
	"fmt"
	"io"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/fn/framework"
)

// printer writes kpt's transcript.
type printer struct{ w io.Writer }

func (p *printer) printf(format string, a ...any) {
	if p.w != nil {
		fmt.Fprintf(p.w, format, a...)
	}
}

func printResults(p *printer, results []*framework.Result) {
	if len(results) == 0 {
		return
	}
	p.printf("  [Results]:\n")
	for _, r := range results {
		p.printf("    %s\n", strings.ReplaceAll(r.String(), "\n", " "))
	}
}

func printStderr(p *printer, stderr string) {
	if stderr == "" {
		return
	}
	p.printf("  Stderr:\n")
	for _, l := range strings.Split(stderr, "\n") {
		p.printf("    %s\n", l)
	}
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }
