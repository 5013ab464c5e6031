package pipeline

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestStateDirPlantedLink (issue 21): another user's link at
// $TMPDIR/kptr-state-<uid> pointing at a private directory of the user's is
// never followed: the journal key is not written there, the directory is
// unchanged, and the error names the link. A directory another user owns
// there is refused the same way (TestStateDirOfAnotherUser).
func TestStateDirPlantedLink(t *testing.T) {
	tmp := stateDirEnv(t)
	victim := t.TempDir()
	os.Chmod(victim, 0o700)
	if err := os.WriteFile(filepath.Join(victim, "document"), []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(tmp, "kptr-state-"+strconv.Itoa(os.Geteuid()))); err != nil {
		t.Fatal(err)
	}
	if _, err := journalKey(); err == nil || !strings.Contains(err.Error(), "is a symbolic link") {
		t.Fatalf("journalKey through a planted link: %v", err)
	}
	if ents, _ := os.ReadDir(victim); len(ents) != 1 {
		t.Fatalf("the link's target changed: %v", ents)
	}
}

func TestStateDirOfAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (chown)")
	}
	tmp := stateDirEnv(t)
	d := filepath.Join(tmp, "kptr-state-0")
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chown(d, 999, 999)
	if _, err := journalKey(); err == nil || !strings.Contains(err.Error(), "owned by uid 999") {
		t.Fatalf("journalKey in another user's directory: %v", err)
	}
	if ents, _ := os.ReadDir(d); len(ents) != 0 {
		t.Fatalf("kptr wrote into another user's directory: %v", ents)
	}
}

// stateDirEnv leaves only $TMPDIR (a fresh directory everyone may write, as
// a Kubernetes emptyDir is: no sticky bit) to hold the state directory.
func stateDirEnv(t *testing.T) string {
	tmp := t.TempDir()
	os.Chmod(tmp, 0o777)
	for k, v := range map[string]string{"KPTR_STATE_DIR": "", "XDG_STATE_HOME": "", "HOME": "/", "XDG_RUNTIME_DIR": "", "TMPDIR": tmp} {
		t.Setenv(k, v)
	}
	return tmp
}
