package pipeline

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	// journal keys go to a private state directory of the test run, never
	// to the user's own
	dir, err := os.MkdirTemp("", "kptr-pipeline-state-")
	if err != nil {
		panic(err)
	}
	os.Setenv("KPTR_STATE_DIR", dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// commitFiles commits files and deletes to the package at dir as a writer does.
func commitFiles(dir string, files map[string][]byte, deletes []string) error {
	w, err := openWriter(dir, nil)
	if err != nil {
		return err
	}
	defer w.Close()
	return w.commit(files, deletes)
}
