package pipeline

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	kptv1 "github.com/kptr-dev/kptr/pipeline/kptfile/v1"
)

// printer writes kpt's transcript.
type printer struct{ w io.Writer }

func (p *printer) printf(format string, a ...any) {
	if p.w != nil {
		fmt.Fprintf(p.w, format, a...)
	}
}

// printResults and printStderr show what a function said, made Printable:
// the transcript reaches terminals (directly, or later through CI logs,
// `kubectl logs` and Argo CD's UI), and a function must not be able to
// write to the clipboard (OSC 52), move the cursor or overwrite a line to
// forge a [PASS]. results.yaml keeps the exact text.
func printResults(p *printer, results []*kptv1.Result) {
	if len(results) == 0 {
		return
	}
	p.printf("  [Results]:\n")
	for _, r := range results {
		p.printf("    %s\n", Printable(strings.ReplaceAll(r.String(), "\n", " ")))
	}
}

func printStderr(p *printer, stderr string) {
	if stderr == "" {
		return
	}
	p.printf("  Stderr:\n")
	for _, l := range strings.Split(Printable(stderr), "\n") {
		p.printf("    %s\n", l)
	}
}

// Printable returns s with everything a terminal would act on made
// visible, as `cat -v` shows it: C0 controls other than newline and tab, and
// DEL, in caret notation (ESC is "^[", CR "^M", BEL "^G"; a CR before a
// newline is dropped), C1 controls, bidirectional overrides and invalid
// UTF-8 as Go escapes ("\u009b", "\u202e", "\xff"). Printable text is
// unchanged.
func Printable(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 && c != '\n' && c != '\t' || c >= 0x7f {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\r' && i+1 < len(s) && s[i+1] == '\n':
			i++
			continue
		case c < 0x20 && c != '\n' && c != '\t', c == 0x7f:
			b.WriteByte('^')
			b.WriteByte(c ^ 0x40)
			i++
			continue
		case c < utf8.RuneSelf:
			b.WriteByte(c)
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, c)
		case r >= 0x80 && r <= 0x9f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }
