package hostile

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/kptr-dev/kptr/test/fnimage"
)

// Hostile function processes: whatever a function's processes do (make
// kptr their tracer and leave a traced zombie, stop themselves, fork a
// grandchild that ignores SIGTERM), kptr ends within the function's timeout
// plus a few seconds, with the function's timeout error, and leaves no
// process and no run state behind. In the sandbox (an image) and on the
// host (an exec function), as root and as uid 999.
func TestFunctionProcessesAlwaysEnd(t *testing.T) {
	const timeout = 2 * time.Second
	for _, tc := range []struct {
		name string
		args []string // the hostile fixture's mode
	}{
		{"traced zombie thread, function hangs", []string{"ptrace-zombie", "hang"}},
		{"traced zombie thread, function exits", []string{"ptrace-zombie", "exit"}},
		{"grandchild ignoring SIGTERM", []string{"forksleep", "MARKER"}},
		{"stopped child", []string{"stopped-child", "MARKER"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachIdentity(t, func(t *testing.T, h *harness) {
				marker := fmt.Sprintf("kptr-proc-%d-%d", os.Getpid(), time.Now().UnixNano())
				args := strings.ReplaceAll(strings.Join(tc.args, " "), "MARKER", marker)
				hangs := tc.args[0] == "forksleep" || tc.args[len(tc.args)-1] == "hang"
				for _, where := range []string{"sandbox", "exec"} {
					t.Run(where, func(t *testing.T) {
						fn := "exec: hostile " + args
						if where == "sandbox" {
							ref := h.importFixture(t, "hostile", strings.Fields(args))
							fn = "image: " + ref
						}
						pkg := h.pkg(t, "pkg-"+where, map[string]string{
							"Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: pkg\npipeline:\n  mutators:\n    - " + fn + "\n",
							"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n",
						})
						r := h.kptr(t, call{
							args:    []string{"fn", "render", pkg, "--allow-exec", "--offline", "--fn-timeout", timeout.String(), "-o", "stdout"},
							timeout: timeout + 20*time.Second,
						})
						r.within(t, timeout+8*time.Second)
						if hangs {
							r.exits(t, 1).says(t, "timed out after "+timeout.String())
						}
						if where == "exec" && tc.args[0] == "forksleep" {
							// On the host a process that left the function's
							// process group (setsid) is out of kptr's reach:
							// only a pid namespace holds every process (the
							// sandbox above). kpt behaves the same.
							killMarked(marker)
							marker = ""
						}
						h.nothingOfRunsLeft(t, marker)
						h.sentinelsUnchanged(t)
					})
				}
			})
		})
	}
}

// A render that fails at its first function leaves no run state: neither
// the failed run's nor that of the next function's sandbox, which kptr had
// prepared while the first one ran.
func TestFailedRenderLeavesNoState(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, h *harness) {
		fail := h.importFixture(t, "hostile", []string{"exit", "3"})
		next := h.importFixture(t, "hostile", []string{"cat"})
		pkg := h.pkg(t, "pkg", map[string]string{
			"Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: pkg\npipeline:\n  mutators:\n    - image: " + fail + "\n    - image: " + next + "\n",
			"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n",
		})
		for range 3 {
			h.kptr(t, call{args: []string{"fn", "render", pkg, "--offline"}}).exits(t, 1).says(t, "failing on purpose")
			h.nothingOfRunsLeft(t, "")
		}
		// What a SIGKILLed kptr left (its lock is free) goes with the next
		// run at once; a live kptr's stays.
		state := h.stateDir()
		rel, err := filepath.Rel(h.base, state)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"kptr-1-deadbeef-1.rw/u", "kptr-1-deadbeef-1"} {
			h.dir(t, filepath.Join(rel, n), 0o700)
		}
		h.write(t, state, map[string]string{"kptr-1-deadbeef.lock": ""})
		h.kptr(t, call{args: []string{"fn", "render", pkg, "--offline"}}).exits(t, 1)
		h.nothingOfRunsLeft(t, "")
	})
}

// importFixture builds an image of fixture whose Cmd is args, and imports
// it into the harness's cache as the harness's identity; it returns its ref.
func (h *harness) importFixture(t *testing.T, fixture string, args []string) string {
	t.Helper()
	if h.id.uid < 0 && os.Geteuid() == 0 {
		// As root a run's container root is an unprivileged host uid, which
		// must traverse $TMPDIR to reach the run-state directory beneath it:
		// the harness makes $TMPDIR 0700, and kptr would then keep its run
		// state in /tmp/kptr-run-0, outside the harness (stateDir).
		if err := os.Chmod(h.tmp, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	ref := "example.test/" + fixture
	if len(args) > 0 {
		ref += "-" + strings.NewReplacer(" ", "-", ".", "-", "/", "-").Replace(strings.ToLower(strings.Join(args, "-")))
	}
	if len(ref) > 100 {
		ref = ref[:100]
	}
	ref += ":v1"
	h.importImage(t, ref, fnimage.Build(t, fixture, fnimage.WithCmd(args...)))
	return ref
}

// importImage imports img into the harness's cache as ref, as the
// harness's identity.
func (h *harness) importImage(t *testing.T, ref string, img v1.Image) {
	t.Helper()
	dir, err := os.MkdirTemp(h.base, "layout-")
	if err != nil {
		t.Fatal(err)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref})); err != nil {
		t.Fatal(err)
	}
	h.own(t, dir)
	h.kptr(t, call{args: []string{"cache", "import", dir}}).exits(t, 0)
}

// stateDir is where the harness's kptr keeps run state ($TMPDIR/kptr-run-<uid>).
func (h *harness) stateDir() string {
	uid := os.Geteuid()
	if h.id.uid >= 0 {
		uid = h.id.uid
	}
	return filepath.Join(h.tmp, "kptr-run-"+strconv.Itoa(uid))
}

// nothingOfRunsLeft fails if the run-state directory holds anything but the
// sandbox probes' cached verdicts (runtime/verdict.go, runtime/namespace/verdict.go: no run's state, kept
// on purpose), or a process whose command line holds marker is alive.
func (h *harness) nothingOfRunsLeft(t *testing.T, marker string) {
	t.Helper()
	var left []string
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		left = left[:0]
		des, _ := os.ReadDir(h.stateDir())
		for _, de := range des {
			if !strings.HasPrefix(de.Name(), "probe-verdict-") {
				left = append(left, "state: "+de.Name())
			}
		}
		if marker != "" {
			procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
			for _, p := range procs {
				if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(marker)) {
					left = append(left, "process: "+p)
				}
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(left) > 0 {
		t.Errorf("left after the run: %v", left)
	}
}

// killMarked SIGKILLs every process whose command line holds marker.
func killMarked(marker string) {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(marker)) {
			if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}
