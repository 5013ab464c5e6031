package fileerr

import (
	"strings"
	"testing"
)

// Errors keep their place and cause and lose every excerpt of the file.
func TestMessageDropsExcerpts(t *testing.T) {
	cases := []struct{ in, want string }{
		{"yaml: line 3: mapping values are not allowed in this context", "yaml: line 3: mapping values are not allowed in this context"},
		{"yaml: unmarshal errors:\n  line 10: cannot unmarshal !!map into string", "yaml: unmarshal errors:\n  line 10: cannot unmarshal !!map into string"},
		{"yaml: unmarshal errors:\n  line 1: cannot unmarshal !!str `root:x:0...` into v1.KptFile", "yaml: unmarshal errors:\n  line 1: cannot unmarshal !!str"},
		{"wrong node kind: expected MappingNode but got ScalarNode: node contents:\nroot:x:0:0:SECRET\n", "wrong node kind: expected MappingNode but got ScalarNode"},
		{"invalid document separator: --- SECRET", "invalid document separator"},
		{`yaml: line 4: mapping key "SECRET" already defined at line 2`, "yaml: line 4: mapping key"},
	}
	for _, c := range cases {
		if got := Message(c.in); got != c.want || strings.Contains(got, "SECRET") || strings.Contains(got, "root:x") {
			t.Errorf("Message(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if YAML(nil) != nil {
		t.Error("YAML(nil) != nil")
	}
}
