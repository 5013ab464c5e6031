package hostile

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kptr-dev/kptr/test/hostileregistry"
)

// The background fetch (`kptr generate` on a cold cache): the pull goes on
// in a detached process after the render's deadline, so a registry that
// never answers could keep that process alive forever. It must end within
// its own limit (KPTR_FETCH_TIMEOUT), whatever the registry's idle timeout,
// and its failure must reach the next render.

// fetchers lists the running background fetches of the cache dir.
func fetchers(cacheDir string) []string {
	var pids []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(b), "cache\x00fetch\x00") && strings.Contains(string(b), cacheDir) {
			pids = append(pids, filepath.Base(filepath.Dir(p)))
		}
	}
	return pids
}

func TestHostileRegistryBackgroundFetchBounded(t *testing.T) {
	s := startRegistry(t)
	forEachIdentity(t, func(t *testing.T, h *harness) {
		t.Cleanup(func() { // only when the case failed
			for _, pid := range fetchers(h.cache) {
				if n, err := strconv.Atoi(pid); err == nil {
					syscall.Kill(n, syscall.SIGKILL)
				}
			}
		})
		pkg := h.pkg(t, "pkg", map[string]string{
			"Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: pkg\npipeline:\n  mutators:\n  - image: " + s.Ref(hostileregistry.Stall) + "\n",
			"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n",
		})
		// The registry may keep a request waiting ten minutes; the fetch
		// may take 4 s; the render 2 s.
		env := []string{"KPTR_ALLOWED_IMAGES=" + s.Host + "/**", "KPTR_REGISTRY_TIMEOUT=10m", "KPTR_PROGRESS=none", "KPTR_TIMEOUT=2s", "KPTR_FETCH_TIMEOUT=4s"}
		t0 := time.Now()
		r := h.kptr(t, call{args: []string{"generate"}, dir: pkg, env: env, timeout: 30 * time.Second})
		r.exits(t, 3).says(t, "kptr generate: ", "timed out after 2s", s.Ref(hostileregistry.Stall)+" is still being fetched in the background", "retry").
			within(t, 5*time.Second)
		t.Logf("first render: %s", strings.TrimSpace(r.stderr))
		if r.stdout != "" {
			t.Errorf("stdout %q, want nothing", r.stdout)
		}
		if len(fetchers(h.cache)) == 0 {
			t.Fatalf("no background fetch running after the render ended")
		}
		for len(fetchers(h.cache)) > 0 {
			if time.Since(t0) > 4*time.Second+fetchGraceAndSlack {
				t.Fatalf("background fetch %v still running %s after the render started (limit 4s)", fetchers(h.cache), time.Since(t0).Round(time.Millisecond))
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("the background fetch ended %s after the render started", time.Since(t0).Round(time.Millisecond))
		// The next render starts a fetch that fails within its limit (1 s,
		// less than the render's) and says why.
		env = append(env, "KPTR_TIMEOUT=20s", "KPTR_FETCH_TIMEOUT=1s")
		r = h.kptr(t, call{args: []string{"generate"}, dir: pkg, env: env, timeout: 30 * time.Second})
		r.exits(t, 3).says(t, "kptr generate: ", s.Ref(hostileregistry.Stall), "registry "+s.Host, "limit of 1s (KPTR_FETCH_TIMEOUT)").
			within(t, 5*time.Second)
		t.Logf("second render: %s", strings.TrimSpace(r.stderr))
		if p := fetchers(h.cache); len(p) > 0 {
			t.Errorf("background fetch %v left after the render that waited for it", p)
		}
		h.cacheBounded(t, 0)
		h.sentinelsUnchanged(t)
	})
}

// fetchGraceAndSlack: the fetch ends as soon as its limit cancels the
// request (a timer ends it 10 s after the limit in any case); 3 s of slack
// for a loaded machine.
const fetchGraceAndSlack = 3 * time.Second
