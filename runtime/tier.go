package runtime

import (
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"
)

// Tier is one way of isolating functions: a sandbox tier. A tier's package
// implements it and registers it (Register) from its init; the registry
// package runtime/tiers imports every tier, so that a program, kptr doctor
// and the tier test suite (tiers_test.go) see them all.
type Tier interface {
	// Info names the tier and says when --sandbox=auto picks it.
	Info() TierInfo
	// Probe checks, in the current process's environment, what the tier
	// needs, one result per prerequisite (Required says whether it can
	// run); stateDir is the run-state directory (DefaultStateDir unless
	// the caller has another). With fresh, a cached verdict is not used but
	// replaced. A tier that needs nothing of the environment returns
	// results that are all StatusOK.
	Probe(stateDir string, fresh bool) []ProbeResult
	// Open probes (or reuses a cached verdict) and returns the tier's
	// Sandbox, or a *ProbeError naming the prerequisite that is missing.
	Open(opts ...Option) (Sandbox, error)
}

// TierInfo describes a registered tier.
type TierInfo struct {
	// Name is how --sandbox (KPTR_SANDBOX) names the tier.
	Name string
	// Summary is kptr doctor's heading for the tier's probes: what it
	// isolates with.
	Summary string
	// Auto orders the tiers --sandbox=auto tries, strongest first (1
	// before 2); 0: auto never picks the tier (it is chosen by name only).
	Auto int
	// Caveat, when the tier is chosen, says what it cannot give (kptr
	// doctor prints it; auto's notice on stderr names it).
	Caveat string
}

// Sandbox is a tier opened for runs: probe (done by Open), prepare, run,
// close. It is safe for concurrent use.
type Sandbox interface {
	// Run runs the function b with inv and returns its result; a bundle
	// without Rootfs (an exec function) runs through Host.
	Runner
	// Prepare may set a run of b with an invocation of inv's shape up
	// ahead, so that a later Run of it starts faster; a tier that cannot
	// does nothing.
	Preparer
	// Probes are the probe results the sandbox was opened on.
	Probes() []ProbeResult
	// Close releases what the sandbox holds (prepared runs, its hold on
	// the run-state directory); a program calls it before it exits.
	Close() error
}

// Settings are what every tier takes from Options. Tiers read them with
// NewSettings; an Option only one tier understands is a TierOption.
type Settings struct {
	// StateDir holds run state (default: DefaultStateDir).
	StateDir string
	// Timeout is a run's time limit unless its Invocation says otherwise.
	Timeout time.Duration
	// MaxOutput caps stdout and stderr of a run, each, in bytes.
	MaxOutput int64
	// Limits bound what one run may use.
	Limits Limits
	// Log receives debug notes (never nil once NewSettings made it).
	Log *slog.Logger
	// NoProbeCache: probe afresh even where a cached verdict matches.
	NoProbeCache bool
	// NoOverlay: keep runs on a read-only view of the image where a tier
	// could give them a writable one.
	NoOverlay bool
	// ImageDir is the directory the runs' images come from (the image
	// cache), checked by Open for a tier that needs something of it
	// (ImageDirChecker); "" skips the check.
	ImageDir string
	// CompileCache is where a tier keeps the code it compiles (see
	// WithCompileCache); "" keeps it in memory only.
	CompileCache string
	// CompileNotice, when set, is told the name of each function whose
	// code a run compiles afresh (see WithCompileNotice).
	CompileNotice func(name string)

	tier []func(any)
}

// Option configures a tier's Sandbox.
type Option func(*Settings)

// NewSettings applies opts over the defaults.
func NewSettings(opts ...Option) Settings {
	s := Settings{Timeout: DefaultTimeout, MaxOutput: DefaultMaxOutput, Limits: DefaultLimits}
	for _, o := range opts {
		o(&s)
	}
	if s.Log == nil {
		s.Log = slog.New(slog.DiscardHandler)
	}
	return s
}

// ApplyTier runs the TierOptions among the settings' options on a tier's
// sandbox t.
func (s Settings) ApplyTier(t any) {
	for _, f := range s.tier {
		f(t)
	}
}

// TierOption is an Option only some tier understands: f is given the
// tier's sandbox (before it probes) and ignores any other.
func TierOption(f func(sandbox any)) Option {
	return func(s *Settings) { s.tier = append(s.tier, f) }
}

// WithImageDir names the directory the runs' images come from (the image
// cache), so that Open refuses a tier that could not run them from there.
func WithImageDir(dir string) Option { return func(s *Settings) { s.ImageDir = dir } }

// ImageDirChecker is a Tier whose runs need something of the directory
// their images come from: as root, a tier that runs functions as other
// host uids than kptr's needs every directory above the images traversable
// by them. kptr doctor shows the result as one of the tier's probes; Open
// refuses the tier when it fails, so doctor and the runs agree.
type ImageDirChecker interface {
	CheckImageDir(dir string) ProbeResult
}

// openTier opens t and, where t checks it, refuses it when the images'
// directory is out of its runs' reach.
func openTier(t Tier, opts []Option) (Sandbox, error) {
	sb, err := t.Open(opts...)
	if err != nil {
		return nil, err
	}
	c, ok := t.(ImageDirChecker)
	if dir := NewSettings(opts...).ImageDir; ok && dir != "" {
		if r := c.CheckImageDir(dir); r.Status == StatusFailed {
			sb.Close()
			return nil, &ProbeError{Result: r}
		}
	}
	return sb, nil
}

// WithStateDir sets where run state lives (default: DefaultStateDir). As
// root, the uids functions run as must be able to traverse its parents, or
// the tier refuses it.
func WithStateDir(dir string) Option { return func(s *Settings) { s.StateDir = dir } }

// WithTimeout sets the default time limit of a run (default 5m).
func WithTimeout(d time.Duration) Option { return func(s *Settings) { s.Timeout = d } }

// WithMaxOutput caps stdout and stderr of a run, each, in bytes.
func WithMaxOutput(n int64) Option { return func(s *Settings) { s.MaxOutput = n } }

// WithLimits replaces DefaultLimits.
func WithLimits(l Limits) Option { return func(s *Settings) { s.Limits = l } }

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(s *Settings) { s.Log = l } }

// WithProbeCache(false) makes the tier probe the environment even where a
// cached verdict still matches it (see verdict.go); the fresh verdict
// replaces the cached one. The default is true.
func WithProbeCache(on bool) Option { return func(s *Settings) { s.NoProbeCache = !on } }

// WithOverlay(false) keeps runs on the read-only view of the image (tmpfs
// /tmp and $HOME only) even where an overlay would work. WithOverlay(true)
// is the default: an overlay where the probe shows it works.
func WithOverlay(on bool) Option { return func(s *Settings) { s.NoOverlay = !on } }

var registry struct {
	sync.Mutex
	tiers []Tier
}

// Register adds a tier. Each tier's package calls it once, from its init;
// it panics on a second tier of the same name.
func Register(t Tier) {
	registry.Lock()
	defer registry.Unlock()
	for _, o := range registry.tiers {
		if o.Info().Name == t.Info().Name {
			panic("runtime: tier " + t.Info().Name + " registered twice")
		}
	}
	registry.tiers = append(registry.tiers, t)
	slices.SortStableFunc(registry.tiers, func(a, b Tier) int { return rank(a) - rank(b) })
}

// rank orders tiers: auto's order first, then those auto never picks.
func rank(t Tier) int {
	if a := t.Info().Auto; a > 0 {
		return a
	}
	return 1 << 20
}

// Tiers returns the registered tiers, in the order --sandbox=auto tries
// them (those it never picks last).
func Tiers() []Tier {
	registry.Lock()
	defer registry.Unlock()
	return slices.Clone(registry.tiers)
}

// Lookup returns the registered tier named name.
func Lookup(name string) (Tier, bool) {
	for _, t := range Tiers() {
		if t.Info().Name == name {
			return t, true
		}
	}
	return nil, false
}

// Auto is the name of the mode that picks the strongest tier that can run.
const Auto = "auto"

// Open opens the tier mode names, or, for Auto (or ""), the first tier in
// auto's order whose probes pass. notice is, when auto passed over a
// stronger tier, the line saying so (for stderr). It never falls back to
// running functions unsandboxed: when no tier can run, the error joins
// every tier's refusal (the first a *ProbeError).
func Open(mode string, opts ...Option) (sb Sandbox, notice string, err error) {
	if mode != Auto && mode != "" {
		t, ok := Lookup(mode)
		if !ok {
			return nil, "", fmt.Errorf("no sandbox tier %q", mode)
		}
		sb, err = openTier(t, opts)
		return sb, "", err
	}
	var first error
	var passed []string
	for _, t := range Tiers() {
		info := t.Info()
		if info.Auto == 0 {
			continue
		}
		sb, err := openTier(t, opts)
		if err == nil {
			if first != nil {
				notice = fmt.Sprintf("kptr: %s sandbox unavailable (%v); running functions in the %s tier (%s; 'kptr doctor' says what each tier gives)\n", passed[0], first, info.Name, info.Caveat)
			}
			return sb, notice, nil
		}
		if first == nil {
			first = err
		} else {
			first = fmt.Errorf("%w; the %s tier cannot run either: %s", first, info.Name, err.Error())
		}
		passed = append(passed, info.Name)
	}
	if first == nil {
		first = fmt.Errorf("no sandbox tier registered")
	}
	return nil, "", first
}

// child is a helper process a tier starts from kptr's own binary.
var childMains = map[string]func(args []string){}

// RegisterChild makes HandleInit run f when the process was started with
// arg as its first argument (a tier's probe child, launcher or container
// init): f gets the arguments after it and normally never returns (it
// exits); if it returns, HandleInit does and the program carries on.
func RegisterChild(arg string, f func(args []string)) {
	if _, dup := childMains[arg]; dup {
		panic("runtime: child " + arg + " registered twice")
	}
	childMains[arg] = f
}

// HandleInit must run first in main (and in TestMain of any test binary that
// starts sandboxes), before flags are parsed or goroutines started: when the
// process was started as one of a tier's helper processes (RegisterChild:
// libcontainer's container init, a probe child, the landlock tier's
// launcher) it does that job and never returns.
func HandleInit() {
	if len(os.Args) < 2 {
		return
	}
	if f, ok := childMains[os.Args[1]]; ok {
		f(os.Args[2:])
	}
}

// Reporter is implemented by a Tier with more to say in kptr doctor when it
// is the tier chosen: Report returns those lines (the namespace tier: how
// its runs of images cached in cacheDir start; the landlock tier: what a
// function cannot do there).
type Reporter interface {
	Report(cacheDir string) []string
}
