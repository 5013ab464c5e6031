package signature_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kptr-dev/kptr/signature"
	"github.com/kptr-dev/kptr/test/cosigner"
)

// install lays out a kptr install under a temporary prefix: bin/kptr (an
// empty stand-in: the lookup only needs its place) and, when verifierAt is
// "bin" or "libexec", the verifier there. It returns bin/kptr's path.
func install(t *testing.T, verifierAt string) (exe, prefix string) {
	t.Helper()
	prefix = t.TempDir()
	exe = filepath.Join(prefix, "bin", "kptr")
	if err := os.MkdirAll(filepath.Dir(exe), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	dirs := map[string]string{"bin": filepath.Join(prefix, "bin"), "libexec": filepath.Join(prefix, "libexec", "kptr")}
	if d, ok := dirs[verifierAt]; ok {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(filepath.Dir(self), "kptr-sigverify")) // TestMain's
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "kptr-sigverify"), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return exe, prefix
}

// The verifier is found beside kptr or in ../libexec/kptr/ from it, through
// a symbolic link to kptr (kpt, docker); a signature checked with it is
// allowed as before.
func TestVerifierFoundWhereKptrIsInstalled(t *testing.T) {
	k := cosigner.NewKey(t)
	p := mustParse(t, keyPolicy(k, `{"type": "matchRepository"}`))
	good := []signature.Signature{{Bundle: k.Bundle(t, repo, digest)}}
	for _, at := range []string{"bin", "libexec"} {
		exe, prefix := install(t, at)
		link := filepath.Join(t.TempDir(), "kpt")
		if err := os.Symlink(exe, link); err != nil {
			t.Fatal(err)
		}
		undo := signature.UseVerifierBeside(link)
		if d := p.Evaluate(repo+":v1", digest, good); !d.Allowed {
			t.Errorf("verifier in %s/%s: %s", prefix, at, d.Error())
		}
		undo()
	}
}

// Without its verifier, a signature policy never lets an image through
// unverified: the decision is neither allowed nor a refusal, exit 3, and
// its line names the image, the verifier and where kptr looked.
func TestVerifierMissing(t *testing.T) {
	k := cosigner.NewKey(t)
	p := mustParse(t, keyPolicy(k, `{"type": "matchRepository"}`))
	exe, prefix := install(t, "none")
	defer signature.UseVerifierBeside(exe)()
	d := p.Evaluate(repo+":v1", digest, []signature.Signature{{Bundle: k.Bundle(t, repo, digest)}})
	var ve *signature.VerifierError
	if d.Allowed || !errorsAs(d.Unverified, &ve) || ve.ExitCode() != 3 {
		t.Fatalf("want an unverified decision with a VerifierError (exit 3), got %+v", d)
	}
	want := repo + ":v1@" + digest + ": signatures not checked: kptr's signature verifier kptr-sigverify is not installed (looked for " +
		filepath.Join(prefix, "bin", "kptr-sigverify") + " and " + filepath.Join(prefix, "libexec", "kptr", "kptr-sigverify") + ")"
	if got := d.Error(); !strings.HasPrefix(got, want) || strings.Contains(got, "\n") {
		t.Errorf("got  %s\nwant %s…", got, want)
	}
	// not executable, or writable by anyone: named, never run
	for mode, words := range map[os.FileMode]string{0o644: "is not an executable file", 0o757: "is writable by every user"} {
		exe, prefix := install(t, "bin")
		v := filepath.Join(prefix, "bin", "kptr-sigverify")
		if err := os.Chmod(v, mode); err != nil {
			t.Fatal(err)
		}
		undo := signature.UseVerifierBeside(exe)
		d := p.Evaluate(repo+":v1", digest, []signature.Signature{{Bundle: k.Bundle(t, repo, digest)}})
		if d.Allowed || d.Unverified == nil || !strings.Contains(d.Error(), v+" "+words) {
			t.Errorf("mode %v: want %q, got %+v", mode, words, d)
		}
		undo()
	}
}

// A verifier that dies or hangs mid-verification is one line with what it
// said, in bounded time; the next check does not start another.
func TestVerifierDiesOrHangs(t *testing.T) {
	k := cosigner.NewKey(t)
	p := mustParse(t, keyPolicy(k, ""))
	sig := sigs(k.Sign(cosigner.Payload(repo+":v1", digest)))
	script := func(body string) string {
		path := filepath.Join(t.TempDir(), "kptr-sigverify")
		if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return path
	}
	dies := script("read -r request\necho 'kptr-sigverify: out of memory' >&2\nkill -9 $$")
	undo := signature.UseVerifier(dies)
	defer undo()
	d := p.Evaluate(repo+":v1", digest, sig)
	if want := repo + ":v1@" + digest + ": signatures not checked: the signature verifier " + dies + " ended before it answered (signal: killed: kptr-sigverify: out of memory)"; d.Allowed || d.Error() != want {
		t.Errorf("got  %s\nwant %s", d.Error(), want)
	}
	if d2 := p.Evaluate(repo+":v1", digest, sig); d2.Unverified == nil || d2.Error() != d.Error() {
		t.Errorf("second check after the verifier died: %+v", d2)
	}

	defer signature.SetVerifyTimeout(300 * time.Millisecond)()
	hangs := script("read -r request\nexec sleep 60")
	signature.UseVerifier(hangs)
	start := time.Now()
	d = p.Evaluate(repo+":v1", digest, sig)
	if want := "the signature verifier " + hangs + " did not answer within 300ms"; d.Allowed || !strings.HasSuffix(d.Error(), want) {
		t.Errorf("got  %s\nwant …%s", d.Error(), want)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("a hanging verifier held Evaluate %v", el)
	}

	garbles := script("read -r request\necho 'not json'\nsleep 1")
	signature.UseVerifier(garbles)
	if d := p.Evaluate(repo+":v1", digest, sig); d.Allowed || !strings.Contains(d.Error(), "answered what kptr cannot read") {
		t.Errorf("garbled answer: %+v", d)
	}
}

// A policy whose scope needs no signature, and an image with no signature,
// never start the verifier.
func TestVerifierOnlyForSignatures(t *testing.T) {
	exe, _ := install(t, "none")
	defer signature.UseVerifierBeside(exe)()
	p := mustParse(t, `{"default": [{"type": "insecureAcceptAnything"}], "transports": {"docker": {"`+repo+`": [{"type": "sigstoreSigned", "keyData": "`+b64(cosigner.NewKey(t).PublicPEM)+`"}]}}}`)
	if d := p.Evaluate("registry.example.com/other:v1", digest, nil); !d.Allowed {
		t.Error(d.Error())
	}
	if d := p.Evaluate(repo+":v1", digest, nil); d.Allowed || d.Unverified != nil || !strings.Contains(d.Reason, "no signature") {
		t.Errorf("an unsigned image: %+v", d)
	}
}
