package hostile

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kptr-dev/kptr/test/fnimage"
	"github.com/kptr-dev/kptr/test/registry"
)

// Issue 21 items 1-3, attacked through the real kptr in the landlock tier
// (--sandbox=landlock), as root, as the sidecar (uid 999, no capabilities)
// and as the sidecar under containerd's RuntimeDefault seccomp profile (the
// Argo CD repo server's own setting, where kptr picks this tier by itself).

// landlockPkg makes a package whose one mutator is the escape-report image
// with data (the functionConfig ConfigMap's), and makes the cache and the
// run-state directory ($TMPDIR) reachable for the uids root runs functions
// as (TestLandlockTierHoldsAgainstAnEscapingFunction checks the refusal).
func landlockPkg(t *testing.T, h *harness, ref, name string, data map[string]string) string {
	t.Helper()
	var cfg strings.Builder
	for k, v := range data {
		cfg.WriteString("        " + k + ": \"" + v + "\"\n")
	}
	if h.id.uid < 0 && os.Geteuid() == 0 {
		for _, d := range []string{h.cache, h.tmp} {
			if err := os.Chmod(d, 0o711); err != nil {
				t.Fatal(err)
			}
		}
	}
	return h.pkg(t, name, map[string]string{
		"Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: " + name + "\npipeline:\n  mutators:\n    - image: " + ref + "\n      configMap:\n" + cfg.String(),
		"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n",
	})
}

func escapeImage(t *testing.T) string {
	t.Helper()
	reg := registry.Start(t)
	ref := reg.Addr + "/kpt-fn/escape-report:v1"
	fnimage.Push(t, fnimage.Build(t, "escape-report"), ref)
	return ref
}

// runDirs lists the landlock tier's run directories in the identity's
// run-state directory ($TMPDIR/kptr-run-<uid>).
func (h *harness) runDirs(t *testing.T) []string {
	t.Helper()
	uid := os.Geteuid()
	if h.id.uid >= 0 {
		uid = h.id.uid
	}
	dirs, _ := filepath.Glob(filepath.Join(h.tmp, "kptr-run-"+strconv.Itoa(uid), "kptr-*.ll"))
	return dirs
}

// A function finds no way to a host UNIX socket (ssh-agent's, a plugin's in
// Argo CD's shared plugins volume, docker's) nor the list of them: connect,
// sendto and a datagram socketpair all fail and the host sockets receive
// nothing; /proc/self/net/unix and the host's mount table are unreadable.
// The render succeeds.
func TestLandlockTierNoHostUnixSocket(t *testing.T) {
	ref := escapeImage(t)
	forIdentities(t, sidecarIdentities(), func(t *testing.T, h *harness) {
		var reached atomic.Int64
		agent, log := filepath.Join(h.base, "agent.sock"), filepath.Join(h.base, "log.sock")
		l, err := net.Listen("unix", agent)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				reached.Add(1)
				c.Close()
			}
		}()
		d, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: log, Net: "unixgram"})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		go func() {
			buf := make([]byte, 64)
			for {
				if _, _, err := d.ReadFrom(buf); err != nil {
					return
				}
				reached.Add(1)
			}
		}()
		// The function's uid may write to them, as to its own uid's sockets.
		for _, s := range []string{agent, log} {
			if err := os.Chmod(s, 0o777); err != nil {
				t.Fatal(err)
			}
		}
		procs := []string{"/proc/self/net/unix", "/proc/net/unix", "/proc/self/mountinfo", "/proc/self/mounts", "/proc/1/cmdline"}
		pkg := landlockPkg(t, h, ref, "pkg", map[string]string{"unix": agent + "," + log, "read": strings.Join(procs, ",")})
		h.kptr(t, call{args: []string{"fn", "render", pkg, "--sandbox=landlock"}}).exits(t, 0).rssBelow(t, 512<<20)
		time.Sleep(100 * time.Millisecond)
		if n := reached.Load(); n > 0 {
			t.Errorf("host UNIX sockets reached %d times", n)
		}
		report := escapeReport(t, pkg)
		for k, v := range report {
			if (strings.HasPrefix(k, "unix ") && v == "reached") || (strings.HasPrefix(k, "read ") && v == "readable") {
				t.Errorf("%s: %s", k, v)
			}
		}
		if len(report) < 6+len(procs) {
			t.Errorf("the report is incomplete: %v", report)
		}
		h.sentinelsUnchanged(t)
	})
}

// A function that holds more memory than the run's limit (2 GiB, the
// namespace tier's), spread over processes that each stay below it, or
// writes more than its scratch space's bound (512 MiB: $HOME and $TMPDIR of
// 256 MiB each, as the namespace tier's tmpfs) across files that each stay
// below RLIMIT_FSIZE, is ended: the render fails with one line naming the
// limit within 20 s, and the run directory is gone.
func TestLandlockTierBoundsMemoryAndDisk(t *testing.T) {
	ref := escapeImage(t)
	forIdentities(t, sidecarIdentities(), func(t *testing.T, h *harness) {
		for _, tc := range []struct {
			name string
			data map[string]string
			says string
		}{
			{"memory", map[string]string{"alloc": "3,900", "sleep": "30"}, "memory limit exceeded"},
			{"disk", map[string]string{"fill": "14,50", "sleep": "30"}, "disk limit exceeded"},
		} {
			pkg := landlockPkg(t, h, ref, tc.name, tc.data)
			// No rssBelow: the harness's peak RSS includes the largest of
			// kptr's waited descendants, here the function's 900 MiB.
			h.kptr(t, call{args: []string{"fn", "render", pkg, "--sandbox=landlock"}}).exits(t, 1).
				says(t, "escape-report", tc.says).within(t, 20*time.Second)
			if left := h.runDirs(t); len(left) > 0 {
				t.Errorf("%s: run directories left: %v", tc.name, left)
			}
		}
		h.sentinelsUnchanged(t)
	})
}

// Argo CD SIGKILLs kptr at its deadline, mid-run: the function dies with it
// and the next kptr removes the killed one's run directory (100 MiB the
// function wrote) at once, not an hour later.
func TestLandlockTierKilledKptrLeavesNothing(t *testing.T) {
	ref := escapeImage(t)
	forIdentities(t, sidecarIdentities(), func(t *testing.T, h *harness) {
		pkg := landlockPkg(t, h, ref, "pkg", map[string]string{"fill": "4,25", "sleep": "60"})
		written := func() bool {
			for _, d := range h.runDirs(t) {
				if fi, err := os.Stat(filepath.Join(d, "tmp", "fill-3")); err == nil && fi.Size() == 25<<20 {
					return true
				}
			}
			return false
		}
		r := h.kptr(t, call{args: []string{"fn", "render", pkg, "--sandbox=landlock"}, killWhen: written})
		if r.code != -1 || !written() {
			t.Fatalf("kptr was not killed mid-run (exit %d, run directories %v)", r.code, h.runDirs(t))
		}
		killed := h.runDirs(t)
		other := landlockPkg(t, h, ref, "other", map[string]string{})
		h.kptr(t, call{args: []string{"fn", "render", other, "--sandbox=landlock"}}).exits(t, 0)
		for _, d := range killed {
			if _, err := os.Lstat(d); err == nil {
				t.Errorf("the killed kptr's run directory %s survived the next kptr", d)
			}
		}
		h.sentinelsUnchanged(t)
	})
}
