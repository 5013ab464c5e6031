package fnenv

import (
	"errors"
	"strings"
	"testing"

	"github.com/kptr-dev/kptr/runtime"
)

// fakeTier is a registered tier whose probes say ok or fail.
type fakeTier struct {
	name string
	auto int
	ok   bool
}

func (f fakeTier) Info() runtime.TierInfo { return runtime.TierInfo{Name: f.name, Auto: f.auto} }
func (f fakeTier) Probe(string, bool) []runtime.ProbeResult {
	if f.ok {
		return []runtime.ProbeResult{{Name: "p", Status: runtime.StatusOK}}
	}
	return []runtime.ProbeResult{{Name: "p", Status: runtime.StatusFailed, Detail: f.name + " refused", Fix: "fix-" + f.name}}
}
func (f fakeTier) Open(...runtime.Option) (runtime.Sandbox, error) {
	return nil, runtime.Required(f.Probe("", false))
}

var fakes = []runtime.Tier{fakeTier{"strong", 1, false}, fakeTier{"weak", 2, true}, fakeTier{"named", 0, true}}

func init() {
	for _, t := range fakes {
		runtime.Register(t)
	}
}

func TestParseSandboxIsTheOnePlaceForTheWords(t *testing.T) {
	for word, want := range map[string]string{"": "auto", "auto": "auto", "none": "none", "strong": "strong", "named": "named"} {
		got, err := ParseSandbox(word, "--sandbox")
		if err != nil || got != want {
			t.Errorf("ParseSandbox(%q) = %q, %v; want %q", word, got, err, want)
		}
	}
	_, err := ParseSandbox("gvisor", "KPTR_SANDBOX")
	var fe *Error
	if !errors.As(err, &fe) || fe.ExitCode() != ExitUsage {
		t.Fatalf("ParseSandbox(gvisor): %v, want a usage error (exit 2)", err)
	}
	if want := `KPTR_SANDBOX: want auto, strong, weak, named, wasm or none, got "gvisor"`; err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
}

func TestChooseIsWhatOpenPicks(t *testing.T) {
	results := make([][]runtime.ProbeResult, len(fakes))
	for i, f := range fakes {
		results[i] = f.Probe("", true)
	}
	for mode, want := range map[string]struct {
		tier   int
		passed int
	}{"": {1, 1}, "auto": {1, 1}, "strong": {-1, 1}, "weak": {1, 0}, "named": {2, 0}} {
		c, err := Choose(mode, fakes, results)
		if err != nil || c.Tier != want.tier || len(c.Passed) != want.passed || c.None {
			t.Errorf("Choose(%q) = %+v, %v; want tier %d, %d passed over", mode, c, err, want.tier, want.passed)
		}
	}
	if c, _ := Choose("none", fakes, results); !c.None || c.Tier != -1 {
		t.Errorf("Choose(none) = %+v", c)
	}
}

func TestOpenSandboxRefusesWithTheFixAndNeverFallsBackToNone(t *testing.T) {
	r, notice, closeFn, err := OpenSandbox(SandboxConfig{Mode: "none"})
	if _, ok := r.(runtime.Host); err != nil || !ok || notice != "" || closeFn != nil {
		t.Fatalf("none: %T %q %v", r, notice, err)
	}
	_, _, _, err = OpenSandbox(SandboxConfig{Mode: "strong"})
	var fe *Error
	if !errors.As(err, &fe) || fe.ExitCode() != ExitEnv || !strings.Contains(err.Error(), "fix: fix-strong") {
		t.Fatalf("strong: %v, want a refusal (exit 3) naming its fix", err)
	}
	if _, _, _, err = OpenSandbox(SandboxConfig{Mode: "bogus"}); !errors.As(err, &fe) || fe.ExitCode() != ExitUsage {
		t.Fatalf("bogus: %v, want a usage error", err)
	}
}
