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

// printResults and printStderr show what a function said as kpt main's
// printFnResult and printFnStderr do (pkg/fn/runtime/runner.go, through
// runneroptions.SingleLineFormatter with Indent 2 and LineIndent 2): a
// title line indented by two, then one line per result (or per line of
// stderr) indented by four, each with its newlines turned into spaces and
// its surrounding white space trimmed. Each line is then made Printable:
// the transcript reaches terminals (directly, or later through CI logs,
// `kubectl logs` and Argo CD's UI), and a function must not be able to
// write to the clipboard (OSC 52), move the cursor or overwrite a line to
// forge a [PASS]. results.yaml keeps the exact text.
func printResults(p *printer, results []*kptv1.Result) {
	if len(results) == 0 {
		return
	}
	lines := make([]string, len(results))
	for i, r := range results {
		lines[i] = r.String()
	}
	printLines(p, "[Results]", lines)
}

func printStderr(p *printer, stderr string) {
	if stderr == "" {
		return
	}
	printLines(p, "Stderr", strings.Split(stderr, "\n"))
}

// printLines is kpt's SingleLineFormatter with Indent 2, LineIndent 2 and
// a newline as separator, followed by a newline.
func printLines(p *printer, title string, lines []string) {
	p.printf("  %s:\n", title)
	for _, l := range lines {
		p.printf("    %s\n", Printable(strings.TrimSpace(strings.ReplaceAll(l, "\n", " "))))
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
