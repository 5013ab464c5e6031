package signatures

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// installKptr copies the suite's kptr into a directory of its own and, when
// verifier is not empty, writes it there as kptr-sigverify (a script).
func installKptr(t *testing.T, verifier string) string {
	t.Helper()
	d := filepath.Join(t.TempDir(), "bin")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(binDir, "kptr"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "kptr"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	if verifier != "" {
		if err := os.WriteFile(filepath.Join(d, "kptr-sigverify"), []byte("#!/bin/sh\n"+verifier+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// kptr-sigverify ships with kptr: a kptr installed without it refuses to
// run anything a signature policy must check (exit 3, one line naming the
// image, the verifier and where kptr looked), never lets it through
// unverified; one that dies mid-verification is one line too. Without a
// policy the verifier is never started; with one, once per run for every
// image, and not at all when the verdicts are remembered.
func TestVerifierShipsWithKptr(t *testing.T) {
	f := setup(t)
	w := newWorld(t, identities()[0])
	pol := f.policy(t, w, f.key)
	mirror := "KPTR_MIRRORS=gcr.io=" + f.reg.Addr
	policy := []string{mirror, "KPTR_SIGNATURE_POLICY=" + pol}

	t.Run("missing", func(t *testing.T) {
		bin := installKptr(t, "")
		image := upstream("signed") + ":v1"
		p := pkg(t, w, "pkg-missing", image)
		before := snapshot(t, filepath.Join(p, "cm.yaml"))
		w.kptrFrom(t, bin, "", policy, "fn", "render", p).exits(t, 3).says(t,
			image+"@"+f.digests["signed"]+": signatures not checked: kptr's signature verifier kptr-sigverify is not installed (looked for "+
				filepath.Join(bin, "kptr-sigverify")+" and "+filepath.Join(filepath.Dir(bin), "libexec", "kptr", "kptr-sigverify")+")")
		w.kptrFrom(t, bin, "", policy, "cache", "pull", upstream("bundle-signed")+":v1").exits(t, 3).says(t, "signatures not checked")
		if after := snapshot(t, filepath.Join(p, "cm.yaml")); after != before {
			t.Errorf("the package changed:\n%s\n---\n%s", before, after)
		}
		w.kptrFrom(t, bin, "", policy, "doctor").exits(t, 3).says(t, "signature verifier: MISSING: kptr's signature verifier kptr-sigverify is not installed")
		// a policy that needs no signature needs no verifier
		w.kptrFrom(t, bin, "", []string{mirror}, "fn", "render", pkg(t, w, "pkg-missing-nopolicy", upstream("unsigned")+":v1")).exits(t, 0)
	})

	t.Run("dies", func(t *testing.T) {
		bin := installKptr(t, "read -r request\necho 'kptr-sigverify: out of memory' >&2\nkill -9 $$")
		w := newWorld(t, identities()[0]) // a cache without remembered verdicts
		pol := f.policy(t, w, f.key)
		image := upstream("signed") + ":v1"
		w.kptrFrom(t, bin, "", []string{mirror, "KPTR_SIGNATURE_POLICY=" + pol}, "fn", "render", pkg(t, w, "pkg-dies", image)).exits(t, 3).says(t,
			image+"@"+f.digests["signed"]+": signatures not checked: the signature verifier "+filepath.Join(bin, "kptr-sigverify")+
				" ended before it answered (signal: killed: kptr-sigverify: out of memory)")
	})

	t.Run("started only to check signatures", func(t *testing.T) {
		runs := filepath.Join(w.dir(t, "verifier-runs"), "log")
		bin := installKptr(t, "echo run >> "+runs+"\nexec "+filepath.Join(binDir, "kptr-sigverify"))
		count := func() int {
			b, _ := os.ReadFile(runs)
			return strings.Count(string(b), "run\n")
		}
		w.kptrFrom(t, bin, "", []string{mirror}, "fn", "render", pkg(t, w, "pkg-nopolicy", upstream("unsigned")+":v1")).exits(t, 0)
		// doctor says where it is, without running it
		w.kptrFrom(t, bin, "", policy, "doctor").says(t, "signature verifier: "+filepath.Join(bin, "kptr-sigverify")+" (run only to check a signature)")
		if n := count(); n != 0 {
			t.Fatalf("without a policy (and by doctor) the verifier ran %d times", n)
		}
		// two images, classic and bundle signatures: one verifier
		two := w.write(t, "pkg-two", map[string]string{
			"Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: app\npipeline:\n  mutators:\n  - image: " +
				upstream("signed") + ":v1\n  - image: " + upstream("bundle-signed") + ":v1\n",
			"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: v\n",
		})
		w.kptrFrom(t, bin, "", policy, "fn", "render", two).exits(t, 0)
		if n := count(); n != 1 {
			t.Fatalf("a render checking two images ran the verifier %d times, want 1", n)
		}
		// the verdicts are remembered: the next render starts none
		w.kptrFrom(t, bin, "", policy, "fn", "render", two).exits(t, 0)
		if n := count(); n != 1 {
			t.Errorf("a render with remembered verdicts ran the verifier (%d runs in all)", n)
		}
	})
}
