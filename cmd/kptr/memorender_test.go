package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
)

// renderIn runs kptr fn render args with env, as a user's shell would.
func renderIn(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	g := newGlobals(nil, &out, &errb, envMap(env))
	if err := execIn(context.Background(), g, append([]string{"fn", "render"}, args...)...); err != nil {
		if code = exitCodeOf(err); code == 0 {
			t.Fatalf("error with exit code 0: %v", err)
		}
	}
	return code, out.String(), errb.String()
}

// The first fn render of a package on a cold cache pulls its images and
// then records the render, so a render of an unchanged copy of the package
// is replayed as a whole. The key is taken from the tree as the render
// read it (in place, the render rewrites it) and from the digests the
// images resolved to once pulled: before, the key was made before any
// pull, so a render that had to pull recorded nothing and the next one ran
// every function again.
func TestRenderRecordsThePackageAfterAColdPull(t *testing.T) {
	f := fixture(t)
	pkg := t.TempDir() + "/echo"
	env := genEnv(t, f, map[string]string{"KPTR_LOG_LEVEL": "debug", "KPTR_MEMO": "on"})
	const replayed = "replaying the recorded render of this unchanged package"
	fresh := func() {
		if err := os.RemoveAll(pkg); err != nil {
			t.Fatal(err)
		}
		writeTree(t, pkg, echoPackage(f))
	}
	fresh()
	code, _, errs := renderIn(t, env, pkg)
	if code != 0 {
		t.Fatalf("cold render: exit %d: %s", code, errs)
	}
	if strings.Contains(errs, replayed) {
		t.Fatalf("the cold render replayed a record:\n%s", errs)
	}
	rendered := treeHash(t, pkg)
	fresh()
	code, _, errs = renderIn(t, env, pkg)
	if code != 0 {
		t.Fatalf("second render: exit %d: %s", code, errs)
	}
	if !strings.Contains(errs, replayed) || strings.Count(errs, "(cached result)") != 2 {
		t.Errorf("the render of an unchanged copy ran again instead of replaying the cold render's record:\n%s", errs)
	}
	if got := treeHash(t, pkg); got != rendered {
		t.Error("the replay left the package other than the render did")
	}
}
