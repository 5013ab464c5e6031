package runtime

import (
	"strings"
	"testing"
)

func TestSmokeCat(t *testing.T) {
	res, _ := run(t, Invocation{Stdin: strings.NewReader("hello\n")}, "cat")
	if string(res.Stdout) != "hello\n" {
		t.Fatalf("stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	_, f := run(t, Invocation{}, "id")
	t.Logf("%v", f)
}
