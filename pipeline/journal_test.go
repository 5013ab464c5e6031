package pipeline

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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

// stageOnly leaves the package at dir as a kptr killed right after its
// commit point would: a committed journal, nothing applied.
func stageOnly(t *testing.T, dir string, files map[string][]byte, deletes []string) {
	t.Helper()
	w, err := openWriter(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.stage(files, deletes); err != nil {
		t.Fatal(err)
	}
}

// signedJournal writes a journal whose operations are ops, signed with this
// user's key for the package at dir, as if kptr had written it.
func signedJournal(t *testing.T, dir string, ops []txOp) {
	t.Helper()
	p, err := openPkgFS(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	lock, err := p.root.Open(".")
	if err != nil {
		t.Fatal(err)
	}
	w := &pkgWriter{pkgFS: p, lock: lock}
	defer lock.Close()
	key, err := journalKey()
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(ops)
	mac, err := w.journalMAC(key, body)
	if err != nil {
		t.Fatal(err)
	}
	writeJournal(t, dir, hex.EncodeToString(mac)+"\n"+string(body))
}

func writeJournal(t *testing.T, dir, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, dataDir), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, journalName), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func stageData(t *testing.T, dir, name, content string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, dataDir), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, txDirName, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(content))
	return hex.EncodeToString(sum[:])
}

// A journal kptr did not write for this package as this user is never acted
// upon: no file inside or outside the package changes, the journal stays
// (an in-place writer refuses the package, saying how to discard it), and a
// read-only render goes on without it. One it wrote itself is rolled forward.
func TestJournalTrust(t *testing.T) {
	type fixture struct{ pkg, outside string }
	cases := []struct {
		name    string
		setup   func(t *testing.T, f fixture)
		wantErr string // "" = rolled forward
	}{
		{"unsigned, ../ and absolute destinations", func(t *testing.T, f fixture) {
			stageData(t, f.pkg, "data/0", "pwned\n")
			writeJournal(t, f.pkg, `[{"src":"data/0","dst":"../../victim"},{"src":"data/0","dst":"`+filepath.Join(f.outside, "victim")+`"},{"dst":"`+filepath.Join(f.outside, "victim")+`"}]`)
		}, "was not written by kptr for this package"},
		{"signed with another key", func(t *testing.T, f fixture) {
			body := `[{"dst":"a.yaml"}]`
			m := hmac.New(sha256.New, make([]byte, 32))
			m.Write([]byte(body))
			writeJournal(t, f.pkg, hex.EncodeToString(m.Sum(nil))+"\n"+body)
		}, "signature does not verify"},
		{"cloned from another package", func(t *testing.T, f fixture) {
			other := writeTree(t, map[string]string{"a.yaml": "other\n"})
			stageOnly(t, other, map[string][]byte{"a.yaml": []byte("from the other package\n")}, nil)
			if err := os.CopyFS(filepath.Join(f.pkg, txDirName), os.DirFS(filepath.Join(other, txDirName))); err != nil {
				t.Fatal(err)
			}
		}, "signature does not verify"},
		{"signed, destination climbs out", func(t *testing.T, f fixture) {
			sum := stageData(t, f.pkg, "data/0", "pwned\n")
			signedJournal(t, f.pkg, []txOp{{Src: "data/0", Dst: "../victim", Sum: sum}})
		}, "is not a clean path inside the package"},
		{"signed, absolute destination", func(t *testing.T, f fixture) {
			sum := stageData(t, f.pkg, "data/0", "pwned\n")
			signedJournal(t, f.pkg, []txOp{{Src: "data/0", Dst: filepath.Join(f.outside, "victim"), Sum: sum}})
		}, "is not a clean path inside the package"},
		{"signed, destination through a symlink", func(t *testing.T, f fixture) {
			sum := stageData(t, f.pkg, "data/0", "pwned\n")
			if err := os.Symlink(f.outside, filepath.Join(f.pkg, "link")); err != nil {
				t.Fatal(err)
			}
			signedJournal(t, f.pkg, []txOp{{Src: "data/0", Dst: "link/victim", Sum: sum}})
		}, "link is a symbolic link"},
		{"signed, source outside the staging area", func(t *testing.T, f fixture) {
			signedJournal(t, f.pkg, []txOp{{Src: "../a.yaml", Dst: "b.yaml"}})
		}, "is not a staged file"},
		{"signed, source is a symlink", func(t *testing.T, f fixture) {
			stageData(t, f.pkg, "x", "")
			if err := os.Symlink(filepath.Join(f.outside, "victim"), filepath.Join(f.pkg, txDirName, "data", "0")); err != nil {
				t.Fatal(err)
			}
			signedJournal(t, f.pkg, []txOp{{Src: "data/0", Dst: "b.yaml"}})
		}, "is not a regular file"},
		{"signed, staged file swapped", func(t *testing.T, f fixture) {
			sum := stageData(t, f.pkg, "data/0", "what kptr staged\n")
			stageData(t, f.pkg, "data/0", "something else\n")
			signedJournal(t, f.pkg, []txOp{{Src: "data/0", Dst: "a.yaml", Sum: sum}})
		}, "does not hold what was staged"},
		{"signed, destination in the staging area", func(t *testing.T, f fixture) {
			signedJournal(t, f.pkg, []txOp{{Dst: journalName}})
		}, "inside kptr's staging area"},
		{"staging area is a symlink out", func(t *testing.T, f fixture) {
			if err := os.Symlink(f.outside, filepath.Join(f.pkg, txDirName)); err != nil {
				t.Fatal(err)
			}
		}, "not a directory"},
		{"own journal after a crash", func(t *testing.T, f fixture) {
			stageOnly(t, f.pkg, map[string][]byte{"a.yaml": []byte("new a\n"), "new/c.yaml": []byte("new c\n")}, []string{"b.yaml"})
		}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := fixture{
				pkg:     writeTree(t, map[string]string{"a.yaml": "old a\n", "b.yaml": "old b\n"}),
				outside: writeTree(t, map[string]string{"victim": "precious\n"}),
			}
			c.setup(t, f)
			before, outBefore := lsnapshot(t, f.pkg), lsnapshot(t, f.outside)

			// a read-only open never acts on a foreign journal
			var warned []string
			fsys, err := openReader(f.pkg, true, func(s string) { warned = append(warned, s) })
			if c.wantErr != "" {
				if err != nil {
					t.Fatalf("reader failed on a foreign journal: %v", err)
				}
				fsys.Close()
				if !equalTrees(lsnapshot(t, f.pkg), before) || !equalTrees(lsnapshot(t, f.outside), outBefore) {
					t.Fatal("a reader acted on the journal")
				}
			} else if err == nil {
				fsys.Close()
			}

			err = Recover(f.pkg)
			if !equalTrees(lsnapshot(t, f.outside), outBefore) {
				t.Fatalf("files outside the package changed: %v", lsnapshot(t, f.outside))
			}
			if c.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				s := lsnapshot(t, f.pkg)
				if s["a.yaml"] != "-rw-r--r-- new a\n" || s[filepath.Join("new", "c.yaml")] != "-rw-r--r-- new c\n" || len(s) != 2 {
					t.Fatalf("own journal not rolled forward: %v", s)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("error %v, want %q", err, c.wantErr)
			}
			if !equalTrees(lsnapshot(t, f.pkg), before) {
				t.Fatal("the package changed")
			}
			if strings.Contains(c.name, "unsigned") && (len(warned) != 1 || !strings.Contains(warned[0], "[WARN]")) {
				t.Fatalf("reader warnings %q", warned)
			}
		})
	}
}

// lsnapshot is snapshot that records a symbolic link as "-> target"
// instead of following it.
func lsnapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if info.Mode()&os.ModeSymlink != 0 {
			target, err := os.Readlink(p)
			out[rel] = "-> " + target
			return err
		}
		b, err := os.ReadFile(p)
		out[rel] = fmt.Sprintf("%s %s", info.Mode(), b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A writer of a subpackage waits for a writer of the package around it
// (which writes the subpackage's files too), and the other way round.
func TestSubpackageWriterWaitsForParentWriter(t *testing.T) {
	root := writeTree(t, map[string]string{"Kptfile": kptfile("app", ""), "sub/Kptfile": kptfile("sub", "")})
	for _, order := range [][2]string{{root, filepath.Join(root, "sub")}, {filepath.Join(root, "sub"), root}} {
		first, err := openWriter(order[0], nil)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan *pkgWriter)
		go func() {
			w, err := openWriter(order[1], nil)
			if err != nil {
				t.Error(err)
			}
			done <- w
		}()
		select {
		case <-done:
			t.Fatalf("%s opened for writing while %s was", order[1], order[0])
		case <-time.After(200 * time.Millisecond):
		}
		first.Close()
		select {
		case w := <-done:
			if w != nil {
				w.Close()
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the second writer never got the lock")
		}
	}
}
