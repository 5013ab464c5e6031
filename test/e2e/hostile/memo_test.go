package hostile

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kptr-dev/kptr/cache"
	"github.com/kptr-dev/kptr/test/fnimage"
)

// Memoised function results through the real binary and sandbox: the same
// run is replayed (the transcript says so), any change of input, config,
// image digest or environment runs the function, the records stay in a
// directory only the identity can reach, and a directory others could
// write is never used.

const memoCached = "(cached result)"

// memoPkg is a package whose one mutator labels every resource, with the
// label's value v.
func memoPkg(ref, v string) map[string]string {
	return map[string]string{
		"Kptfile": `apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: app
pipeline:
  mutators:
  - image: ` + ref + `
    configMap:
      op: label
      key: app
      value: ` + v + "\n",
		"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: v\n",
	}
}

func TestMemoReplaysOnlyTheSameRun(t *testing.T) {
	forEachIdentity(t, func(t *testing.T, h *harness) {
		ref := h.importFixture(t, "kptr-fx", nil)
		pkg := h.pkg(t, "pkg", memoPkg(ref, "web"))
		render := func(env ...string) *result {
			return h.kptr(t, call{args: []string{"fn", "render", pkg, "-o", "unwrap"}, env: env}).exits(t, 0)
		}
		first := render("KPTR_MEMO=on").says(t, `[PASS] "`+ref+`" in`).never(t, memoCached)
		again := render("KPTR_MEMO=on").says(t, `[PASS] "`+ref+`" in `, memoCached)
		if again.stdout != first.stdout || !strings.Contains(first.stdout, "app: 'web'") {
			t.Fatalf("replayed output differs:\n%s\nfirst:\n%s", again.stdout, first.stdout)
		}
		// off: fn render's default, and --memo=off over KPTR_MEMO=on
		render().never(t, memoCached)
		h.kptr(t, call{args: []string{"fn", "render", pkg, "-o", "unwrap", "--memo=off"}, env: []string{"KPTR_MEMO=on"}}).exits(t, 0).never(t, memoCached)
		h.kptr(t, call{args: []string{"fn", "render", pkg, "-o", "unwrap", "--memo=on"}}).exits(t, 0).says(t, memoCached)

		// the input changes
		h.write(t, pkg, map[string]string{"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: w\n"})
		render("KPTR_MEMO=on").never(t, memoCached)
		render("KPTR_MEMO=on").says(t, memoCached)
		// the config changes
		h.write(t, pkg, map[string]string{"Kptfile": memoPkg(ref, "api")["Kptfile"]})
		if r := render("KPTR_MEMO=on").never(t, memoCached); !strings.Contains(r.stdout, "app: 'api'") {
			t.Fatalf("config change not applied:\n%s", r.stdout)
		}
		// the image behind the reference changes (another digest)
		h.importImage(t, ref, fnimage.Build(t, "kptr-fx", fnimage.WithEnv("CHANGED=1")))
		render("KPTR_MEMO=on").never(t, memoCached)
		render("KPTR_MEMO=on").says(t, memoCached)

		// the environment changes (fn eval -e)
		eval := func(env string) *result {
			return h.kptr(t, call{args: []string{"fn", "eval", pkg, "-i", ref, "--memo=on", "-e", env, "-o", "unwrap", "--", "op=getenv", "name=X"}}).exits(t, 0)
		}
		eval("X=1").never(t, memoCached).says(t, "1")
		eval("X=1").says(t, memoCached)
		eval("X=2").never(t, memoCached).says(t, "2")

		// the records: the identity's own, reachable by nobody else; 6
		// function runs, and 4 whole renders (one per package or image)
		h.private(t, filepath.Join(h.cache, "memo"))
		if ls := h.kptr(t, call{args: []string{"cache", "ls"}}).exits(t, 0); !strings.Contains(ls.stdout, "memoised results: 10 ") {
			t.Errorf("cache ls does not count the 10 records:\n%s", ls.stdout)
		}
		if pr := h.kptr(t, call{args: []string{"cache", "prune", "--all"}}).exits(t, 0); !strings.Contains(pr.stdout, "removed 10 memoised result(s)") {
			t.Errorf("cache prune --all does not remove the records:\n%s", pr.stdout)
		}
		h.importFixture(t, "kptr-fx", nil)
		render("KPTR_MEMO=on").never(t, memoCached)

		// a memo directory others can write is never used (it holds the
		// record of this very run): it is part of the cache's layout, and
		// a cache others can write is refused, naming it
		render("KPTR_MEMO=on").says(t, memoCached)
		memoDir := filepath.Join(h.cache, cache.MemoDir)
		if err := os.Chmod(memoDir, 0o777); err != nil {
			t.Fatal(err)
		}
		h.kptr(t, call{args: []string{"fn", "render", pkg, "-o", "unwrap"}, env: []string{"KPTR_MEMO=on"}}).
			exits(t, 3).says(t, memoDir, "writable by group or others").never(t, memoCached)
		if err := os.Chmod(memoDir, 0o700); err != nil {
			t.Fatal(err)
		}
		render("KPTR_MEMO=on").says(t, memoCached)
		h.sentinelsUnchanged(t)
	})
}

// TestMemoGenerate: generate memoises by default (Argo CD's unchanged
// apps): the second generate of an unchanged app replays its manifests
// without running anything; a changed file replays only the functions whose
// input did not change; the operator's narrowed allow-list is never
// bypassed by a replay; the app's own parameters cannot turn memo on or off.
func TestMemoGenerate(t *testing.T) {
	const appReplayed = "replayed the recorded manifests"
	forEachIdentity(t, func(t *testing.T, h *harness) {
		ref := h.importFixture(t, "kptr-fx", nil)
		files := memoPkg(ref, "web")
		// the first function sees a alone, the second every resource
		files["Kptfile"] += "    selectors:\n    - name: a\n  - image: " + ref + "\n    configMap:\n      op: set\n      name: b\n      key: k\n      value: x\n"
		files["b.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n"
		pkg := h.pkg(t, "app", files)
		gen := func(env ...string) *result {
			return h.kptr(t, call{args: []string{"generate"}, dir: pkg, env: append([]string{"KPTR_LOG_LEVEL=debug", "KPTR_ALLOWED_IMAGES=example.test/*"}, env...)})
		}
		first := gen().exits(t, 0).never(t, memoCached).never(t, appReplayed)
		var again *result
		for range 3 {
			again = gen("ARGOCD_APP_REVISION="+fmt.Sprint(time.Now().UnixNano())).exits(t, 0).says(t, appReplayed).never(t, "[RUNNING]")
			if again.stdout != first.stdout {
				t.Fatalf("replayed manifests differ:\n%s\nfirst:\n%s", again.stdout, first.stdout)
			}
		}
		gen("KPTR_MEMO=off").exits(t, 0).never(t, memoCached).never(t, appReplayed)
		gen("ARGOCD_ENV_KPTR_MEMO=off", "PARAM_MEMO=off").exits(t, 0).says(t, appReplayed)
		// the narrowed allow-list refuses, as without memo
		gen("KPTR_ALLOWED_IMAGES=example.test/other").exits(t, 2).says(t, "not allowed by the operator's policy").never(t, appReplayed)
		// with an annotation domain the app's metadata is in the key
		a := gen("KPTR_ANNOTATION_DOMAIN=kptr.dev", "ARGOCD_APP_NAME=one").exits(t, 0)
		b := gen("KPTR_ANNOTATION_DOMAIN=kptr.dev", "ARGOCD_APP_NAME=two").exits(t, 0).never(t, appReplayed)
		if !strings.Contains(a.stdout, "app-name: one") || !strings.Contains(b.stdout, "app-name: two") {
			t.Fatalf("app metadata replayed:\n%s\n%s", a.stdout, b.stdout)
		}
		// a changed file: the app runs again, the function whose input
		// did not change replays, the other runs
		h.write(t, pkg, map[string]string{"b.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\ndata:\n  other: y\n"})
		changed := gen().exits(t, 0).never(t, appReplayed)
		if strings.Count(changed.stderr, memoCached) != 1 || !strings.Contains(changed.stdout, "other: y") || !strings.Contains(changed.stdout, "k: x") {
			t.Fatalf("after a changed file, want one function replayed and the change rendered:\n%s\n%s", changed.stderr, changed.stdout)
		}
		t.Logf("generate: first %s, unchanged %s", first.elapsed.Round(time.Millisecond), again.elapsed.Round(time.Millisecond))
	})
}

// uid is the identity's uid.
func (h *harness) uid() int {
	if h.id.uid >= 0 {
		return h.id.uid
	}
	return os.Geteuid()
}

// private fails unless dir is a directory of the identity's, mode 0700.
func (h *harness) private(t *testing.T, dir string) {
	t.Helper()
	st, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if uid := int(st.Sys().(*syscall.Stat_t).Uid); uid != h.uid() || st.Mode().Perm() != 0o700 || !st.IsDir() {
		t.Fatalf("%s: owned by %d, mode %v; want a directory of uid %d, mode 0700", dir, uid, st.Mode(), h.uid())
	}
}
