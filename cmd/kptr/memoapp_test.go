package main

import (
	"strings"
	"testing"
)

// The first generate of an app on a cold cache pulls its images and then
// records its manifests, so the second generate of the unchanged app is
// replayed as a whole (issue 34: the key was taken from the images cached
// at the start, so a generate that had to pull recorded nothing, and the
// second one rendered again).
func TestGenerateRecordsTheAppAfterAColdPull(t *testing.T) {
	f := fixture(t)
	dir := t.TempDir()
	writeTree(t, dir, echoPackage(f))
	env := genEnv(t, f, map[string]string{"KPTR_LOG_LEVEL": "debug"})
	const replayed = "replayed the recorded manifests of this unchanged application"
	code, first, errs := generateIn(t, dir, env)
	if code != 0 {
		t.Fatalf("cold generate: exit %d: %s", code, errs)
	}
	if strings.Contains(errs, replayed) {
		t.Fatalf("the cold generate replayed a record:\n%s", errs)
	}
	code, second, errs := generateIn(t, dir, env)
	if code != 0 {
		t.Fatalf("second generate: exit %d: %s", code, errs)
	}
	if !strings.Contains(errs, replayed) {
		t.Errorf("the second generate of the unchanged app rendered again instead of replaying the cold generate's record:\n%s", errs)
	}
	if second != first {
		t.Errorf("the replay differs from the render:\n%s\n---\n%s", second, first)
	}
}
