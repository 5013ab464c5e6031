package fastyaml

import (
	"strings"
	"testing"
)

// TestDecodeLiteralShapes compares Decode with yaml.v3 on every literal
// block scalar built from a header, up to three body lines of assorted
// indentation (empty, spaces only, text, a tab after spaces) and an ending
// (final line break or not, a following key), in a top-level mapping, a
// nested mapping and a sequence item: the indentation indicator, chomping,
// leading and trailing empty lines, detected indentation and the line that
// ends the scalar are all exercised. Most of what yaml.v3 accepts must be
// handled.
func TestDecodeLiteralShapes(t *testing.T) {
	headers := []string{"|", "|-", "|+", "|1", "|2", "|3", "|1-", "|+2", "|2+", "|-1"}
	bodyLines := []string{"", " ", "  ", "   ", "x", " x", "  x", "   x", " \t"}
	contexts := []struct{ before, after string }{
		{"k: ", "z: 1\n"},
		{"a:\n  k: ", "  z: 1\n"},
		{"- ", "- z\n"},
	}
	var bodies [][]string
	var grow func(prefix []string)
	grow = func(prefix []string) {
		bodies = append(bodies, prefix)
		if len(prefix) == 3 {
			return
		}
		for _, l := range bodyLines {
			grow(append(append([]string(nil), prefix...), l))
		}
	}
	grow(nil)
	total, handled, accepted, acceptedHandled := 0, 0, 0, 0
	var sb strings.Builder
	for _, c := range contexts {
		for _, h := range headers {
			for _, body := range bodies {
				for ending := range 3 {
					sb.Reset()
					sb.WriteString(c.before)
					sb.WriteString(h)
					for _, l := range body {
						sb.WriteString("\n")
						sb.WriteString(l)
					}
					switch ending {
					case 1:
						sb.WriteString("\n")
					case 2:
						sb.WriteString("\n")
						sb.WriteString(c.after)
					}
					data := []byte(sb.String())
					total++
					ok := decCheck(t, "literal", data)
					if ok {
						handled++
					}
					if _, err := decRef(data); err == nil {
						accepted++
						if ok {
							acceptedHandled++
						}
					}
				}
			}
		}
	}
	t.Logf("handled %d of %d literal shapes; %d of the %d yaml.v3 accepts", handled, total, acceptedHandled, accepted)
	if acceptedHandled*10 < accepted*9 {
		t.Errorf("handled only %d of the %d literal shapes yaml.v3 accepts", acceptedHandled, accepted)
	}
}
