package namespace

import (
	"strings"
	"testing"

	"github.com/kptr-dev/kptr/runtime"
)

func TestSmokeCat(t *testing.T) {
	res, _ := run(t, runtime.Invocation{Stdin: strings.NewReader("hello\n")}, "cat")
	if string(res.Stdout) != "hello\n" {
		t.Fatalf("stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	_, f := run(t, runtime.Invocation{}, "id")
	t.Logf("%v", f)
}
