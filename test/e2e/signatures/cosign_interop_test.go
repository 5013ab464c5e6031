//go:build cosign

package signatures

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/kptr-dev/kptr/test/fnimage"
	"github.com/kptr-dev/kptr/test/registry"
)

// Interop with the real cosign CLI (not in `make test`: building cosign
// takes long). Build it from the module proxy and run:
//
//	GOBIN=/tmp/cosign-bin go install github.com/sigstore/cosign/v2/cmd/cosign@v2.6.5
//	KPTR_COSIGN=/tmp/cosign-bin/cosign go test -tags cosign -run TestCosignInterop ./test/e2e/signatures
//
// cosign signs an image by digest with a key it generates (no transparency
// log); kptr, pulling through a mirror, verifies it under a policy that
// remaps the mirror's name, refuses an unsigned image, and refuses the
// signed one named by tag under remapIdentity's matchRepoDigestOrExact (cosign's payload names
// the repository without a tag), as containers/image does; accepts it by tag
// once signed with --sign-container-identity for the Kptfile's name; and
// refuses cosign's --new-bundle-format bundle in words (it names no image).
func TestCosignInterop(t *testing.T) {
	cosign := os.Getenv("KPTR_COSIGN")
	if cosign == "" {
		t.Fatal("KPTR_COSIGN: name the cosign binary (see the comment above)")
	}
	reg := registry.Start(t)
	img := fnimage.Build(t, "cat", fnimage.WithLayers(fnimage.Layer(t, map[string]string{"case": "cosign"})))
	d, _ := img.Digest()
	repo := reg.Addr + "/kpt-fn/cosigned"
	fnimage.Push(t, img, repo+":v1")
	unsigned := fnimage.Build(t, "cat", fnimage.WithLayers(fnimage.Layer(t, map[string]string{"case": "cosign-unsigned"})))
	fnimage.Push(t, unsigned, repo+":v2")
	dir := t.TempDir()
	run := func(env []string, args ...string) {
		cmd := exec.Command(cosign, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		t.Logf("cosign %v:\n%s", args, out)
		if err != nil {
			t.Fatal(err)
		}
	}
	pw := []string{"COSIGN_PASSWORD=x", "HOME=" + dir}
	run(pw, "generate-key-pair")
	run(pw, "sign", "--key", "cosign.key", "--tlog-upload=false", "--allow-insecure-registry", "-y", repo+"@"+d.String())
	w := newWorld(t, identity{"root", -1})
	polDir := w.write(t, "policy", map[string]string{"policy.json": `{"default":[{"type":"reject"}],"transports":{"docker":{"gcr.io/kpt-fn":[{"type":"sigstoreSigned","keyPath":"cosign.pub","signedIdentity":{"type":"remapIdentity","prefix":"gcr.io/kpt-fn","signedPrefix":"` + reg.Addr + `/kpt-fn"}}]}}}`})
	b, _ := os.ReadFile(filepath.Join(dir, "cosign.pub"))
	os.WriteFile(filepath.Join(polDir, "cosign.pub"), b, 0o644)
	env := []string{"KPTR_MIRRORS=gcr.io=" + reg.Addr, "KPTR_SIGNATURE_POLICY=" + filepath.Join(polDir, "policy.json")}
	r := w.kptr(t, "", env, "cache", "pull", "gcr.io/kpt-fn/cosigned@"+d.String())
	t.Logf("signed by cosign, by digest: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	r.exits(t, 0)
	ud, _ := unsigned.Digest()
	r = w.kptr(t, "", env, "cache", "pull", "gcr.io/kpt-fn/cosigned@"+ud.String())
	t.Logf("unsigned: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	r.exits(t, 4)
	r.says(t, "gcr.io/kpt-fn/cosigned@"+ud.String()+": refused by the signature policy", "no signature")
	r = w.kptr(t, "", env, "cache", "pull", "gcr.io/kpt-fn/cosigned:v1")
	t.Logf("signed by cosign, by tag: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	r.exits(t, 4).says(t, "identity mismatch: the signature names "+repo, "cosign sign --sign-container-identity gcr.io/kpt-fn/cosigned")

	// Signed through the mirror for the Kptfile's name, as the refusal
	// suggests (docs/signatures.md): a plain matchRepository policy, no
	// remap, accepts it by tag.
	third := fnimage.Build(t, "cat", fnimage.WithLayers(fnimage.Layer(t, map[string]string{"case": "cosign-identity"})))
	td, _ := third.Digest()
	fnimage.Push(t, third, repo+":v3")
	run(pw, "sign", "--key", "cosign.key", "--tlog-upload=false", "--allow-insecure-registry", "-y",
		"--sign-container-identity", "gcr.io/kpt-fn/cosigned", repo+"@"+td.String())
	w.write(t, "policy", map[string]string{"logical.json": `{"default":[{"type":"reject"}],"transports":{"docker":{"gcr.io/kpt-fn":[{"type":"sigstoreSigned","keyPath":"cosign.pub","signedIdentity":{"type":"matchRepository"}}]}}}`})
	env = []string{"KPTR_MIRRORS=gcr.io=" + reg.Addr, "KPTR_SIGNATURE_POLICY=" + filepath.Join(polDir, "logical.json")}
	r = w.kptr(t, "", env, "cache", "pull", "gcr.io/kpt-fn/cosigned:v3")
	t.Logf("signed for the logical name, by tag: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	r.exits(t, 0)

	// cosign's sigstore bundle (--new-bundle-format, cosign 3's default),
	// in the referrers tag fallback of the mirror's copy: found and
	// verified, but its statement names only the digest, no repository for
	// signedIdentity (sigstore/cosign#5014), so it is refused in words.
	fourth := fnimage.Build(t, "cat", fnimage.WithLayers(fnimage.Layer(t, map[string]string{"case": "cosign-bundle"})))
	fd, _ := fourth.Digest()
	fnimage.Push(t, fourth, repo+":v4")
	run(pw, "sign", "--key", "cosign.key", "--tlog-upload=false", "--allow-insecure-registry", "-y",
		"--new-bundle-format", repo+"@"+fd.String())
	r = w.kptr(t, "", env, "cache", "pull", "gcr.io/kpt-fn/cosigned@"+fd.String())
	t.Logf("a sigstore bundle, by digest: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	r.exits(t, 4).says(t, "the sigstore bundle names only the digest, no image", "cosign sign --new-bundle-format=false")
}
