package fnenv

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/kptr-dev/kptr/runtime"
)

// The --sandbox words besides the registered tiers' names.
const (
	// SandboxAuto (also "") is the strongest tier whose probes pass, else
	// a refusal.
	SandboxAuto = runtime.Auto
	// SandboxNone runs functions unsandboxed: only ever the operator's
	// explicit choice.
	SandboxNone = "none"
)

// Exit codes of the errors fnenv returns (see ExitCode).
const (
	ExitFunction = 1
	ExitUsage    = 2
	ExitEnv      = 3
)

// Error is fnenv's error: Err with the exit code a command ends with.
type Error struct {
	Code int
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// ExitCode is the code a command ends with on e.
func (e *Error) ExitCode() int { return e.Code }

// ExitCode is the exit code err carries (an error with an ExitCode method
// in its chain: fnenv's, the cache's, the commands'), else 1.
func ExitCode(err error) int {
	var ec interface{ ExitCode() int }
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	return ExitFunction
}

// SandboxWords are the words --sandbox takes: auto, every registered
// tier, none.
func SandboxWords() []string {
	words := []string{SandboxAuto}
	for _, t := range runtime.Tiers() {
		words = append(words, t.Info().Name)
	}
	return append(words, SandboxNone)
}

// SandboxModes is SandboxWords for a message: "auto, namespace, … or none".
func SandboxModes() string {
	w := SandboxWords()
	return strings.Join(w[:len(w)-1], ", ") + " or " + w[len(w)-1]
}

// ParseSandbox reads a --sandbox word (from names where it came from, for
// the message): "" is auto; anything but auto, none or a registered tier's
// name is a usage error.
func ParseSandbox(word, from string) (string, error) {
	switch word {
	case "", SandboxAuto:
		return SandboxAuto, nil
	case SandboxNone:
		return SandboxNone, nil
	}
	if _, ok := runtime.Lookup(word); !ok {
		return "", &Error{ExitUsage, fmt.Errorf("%s: want %s, got %q", from, SandboxModes(), word)}
	}
	return word, nil
}

// SandboxConfig is what opening a sandbox takes.
type SandboxConfig struct {
	Mode      string // a --sandbox word
	Timeout   time.Duration
	Log       *slog.Logger
	ImageDir  string // the image cache the runs' images come from
	NoOverlay bool   // KPTR_OVERLAY=0: a read-only image even where an overlay works
	// More are options for the tier beyond these (the wasm images' when
	// the wasm tier is the sandbox).
	More []runtime.Option
}

// OpenSandbox opens the runner c.Mode names: under auto the strongest tier
// whose probes pass (notice, when not "", is the line for stderr saying a
// stronger one was passed over), else a refusal (exit 3) naming the failed
// probe's fix; kptr never falls back to running images unsandboxed on its
// own: none is the operator's choice. close releases the sandbox (nil for
// none).
func OpenSandbox(c SandboxConfig) (r runtime.Runner, notice string, close func() error, err error) {
	mode, err := ParseSandbox(c.Mode, "--sandbox")
	if err != nil {
		return nil, "", nil, err
	}
	if mode == SandboxNone {
		return runtime.Host{Timeout: c.Timeout}, "", nil, nil
	}
	opts := []runtime.Option{runtime.WithTimeout(c.Timeout), runtime.WithImageDir(c.ImageDir)}
	if c.Log != nil {
		opts = append(opts, runtime.WithLogger(c.Log))
	}
	if c.NoOverlay {
		opts = append(opts, runtime.WithOverlay(false))
	}
	sb, notice, err := runtime.Open(mode, append(opts, c.More...)...)
	if err != nil {
		return nil, "", nil, Refusal(err, "")
	}
	return sb, notice, sb.Close, nil
}

// Refusal is the exit-3 error for a sandbox that cannot run, with the fix
// of the failed probe (more is added to the cause).
func Refusal(err error, more string) error {
	var pe *runtime.ProbeError
	if errors.As(err, &pe) {
		return &Error{ExitEnv, fmt.Errorf("%w%s; fix: %s; run 'kptr doctor' to check every prerequisite, or pass --sandbox=none to run functions without a sandbox", err, more, pe.Result.Fix)}
	}
	return &Error{ExitEnv, fmt.Errorf("sandbox: %w%s; run 'kptr doctor'", err, more)}
}

// Choice is the tier a --sandbox word picks, given every registered
// tier's probe results (in runtime.Tiers' order), as OpenSandbox would.
type Choice struct {
	None bool // --sandbox=none
	// Tier is the index of the tier that runs, -1 when none can.
	Tier int
	// Passed holds, for each tier considered and refused before it (or
	// all when none can run), "<name> tier: <refusal>".
	Passed []string
}

// Choose says which tier mode picks among tiers given their probe
// results: the named tier, or auto's first whose required probes pass.
func Choose(mode string, tiers []runtime.Tier, results [][]runtime.ProbeResult) (Choice, error) {
	mode, err := ParseSandbox(mode, "--sandbox")
	if err != nil {
		return Choice{}, err
	}
	if mode == SandboxNone {
		return Choice{None: true, Tier: -1}, nil
	}
	c := Choice{Tier: -1}
	for i, t := range tiers {
		info := t.Info()
		if mode != info.Name && (mode != SandboxAuto || info.Auto == 0) {
			continue
		}
		if err := runtime.Required(results[i]); err != nil {
			c.Passed = append(c.Passed, fmt.Sprintf("%s tier: %v", info.Name, err))
			continue
		}
		c.Tier = i
		return c, nil
	}
	return c, nil
}
