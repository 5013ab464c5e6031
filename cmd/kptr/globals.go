package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/kptr-dev/kptr/cache"
	"github.com/kptr-dev/kptr/fnenv"
	"github.com/kptr-dev/kptr/imageref"
	"github.com/kptr-dev/kptr/pipeline"

	"github.com/kptr-dev/kptr/signature"
)

// globals are the settings commands share, and the process's streams. Each
// setting is a flag and, where an operator would set it in a pod spec, a
// KPTR_* environment variable; the flag wins over the variable.
type globals struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	// kpt is set when the binary runs as "kpt" (kpt.go): kpt's command
	// line, help, error format and exit codes.
	kpt bool

	cacheDir    string
	mirrors     []string
	insecure    []string
	offline     bool
	pullPolicy  string
	imagePrefix string
	fnTimeout   time.Duration
	regTimeout  time.Duration
	sandbox     string
	memo        string // "on", "off" or "" (the command's default)
	logLevel    string
	progress    string
	// flags are the running command's flags (set by checkSettings): which
	// shared settings apply to it, and whether each came from its flag or
	// its variable.
	flags *pflag.FlagSet
	// shared are the shared settings' flags, made once (sharedFlags).
	shared []sharedFlag
	// sigPolicyPath is --signature-policy (KPTR_SIGNATURE_POLICY), and
	// sigPolicy the policy checkSettings loaded from it (nil: none).
	sigPolicyPath string
	sigPolicy     *signature.Policy

	// atExit runs when the command has finished (run's deferred cleanup):
	// the sandbox's Close, so no prepared sandbox outlives kptr. Added to
	// with onExit: the sandbox may be opened by a render's early
	// preparation, on its own goroutine.
	exitMu sync.Mutex
	atExit []func() error
}

// onExit registers f to run when the command has finished.
func (g *globals) onExit(f func() error) {
	g.exitMu.Lock()
	defer g.exitMu.Unlock()
	g.atExit = append(g.atExit, f)
}

// cleanup runs the atExit functions, last registered first.
func (g *globals) cleanup() {
	g.exitMu.Lock()
	fs := g.atExit
	g.atExit = nil
	g.exitMu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		_ = fs[i]()
	}
}

func newGlobals(stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) *globals {
	// Writes to stderr are serialised: the transcript, log and progress
	// lines come from the command's goroutine and from those that prepare
	// sandboxes and fetch images meanwhile.
	return &globals{stdin: stdin, stdout: stdout, stderr: lockedWriter{new(sync.Mutex), stderr}, getenv: getenv}
}

// scope names the commands a shared setting applies to; a command declares
// the scopes it uses (commands.go).
type scope uint8

const (
	// scopeCache: commands that open the image cache.
	scopeCache scope = 1 << iota
	// scopePull: commands that may fetch images from a registry.
	scopePull
	// scopeNames: commands that take image names (the image prefix).
	scopeNames
	// scopeRun: commands that run functions.
	scopeRun
	// scopeLog: commands that log.
	scopeLog
)

// settings declares every shared setting, once: its flag, its variable (named
// in the usage, which is how checkSettings finds it), its default and the
// scope it applies to. Defaults come from the environment so that --help
// shows the effective value.
func (g *globals) settings() []settingGroup {
	env := g.getenv
	return []settingGroup{
		{scopeCache, func(fs *pflag.FlagSet) {
			fs.StringVar(&g.cacheDir, "cache-dir", defaultCacheDir(env), "image cache directory (KPTR_CACHE_DIR)")
		}},
		{scopePull, func(fs *pflag.FlagSet) {
			fs.StringArrayVar(&g.mirrors, "mirror", splitList(env("KPTR_MIRRORS")), "registry mirror SRC=DST, repeatable (KPTR_MIRRORS, comma-separated)")
			fs.StringArrayVar(&g.insecure, "insecure-registry", splitList(env("KPTR_INSECURE_REGISTRIES")), "registry host reached over plain HTTP, repeatable; loopback always may (KPTR_INSECURE_REGISTRIES)")
			fs.BoolVar(&g.offline, "offline", envBool(env("KPTR_OFFLINE")), "never touch the network; a cache miss is an error (KPTR_OFFLINE)")
			fs.StringVar(&g.pullPolicy, "image-pull-policy", envOr(env("KPTR_IMAGE_PULL_POLICY"), "IfNotPresent"), "Always, IfNotPresent or Never (KPTR_IMAGE_PULL_POLICY)")
			fs.DurationVar(&g.regTimeout, "registry-timeout", envDuration(env("KPTR_REGISTRY_TIMEOUT"), 30*time.Second), "time a registry may take to connect, to answer, and to send each next KiB (KPTR_REGISTRY_TIMEOUT)")
			fs.StringVar(&g.sigPolicyPath, "signature-policy", strings.TrimSpace(env("KPTR_SIGNATURE_POLICY")), "containers-policy.json(5) file: only images whose cosign signatures it accepts are pulled and run; none: every image (KPTR_SIGNATURE_POLICY)")
			fs.StringVar(&g.progress, "progress", envOr(env("KPTR_PROGRESS"), "auto"), "auto (bars on a terminal), plain (log lines) or none (KPTR_PROGRESS)")
		}},
		{scopeNames, func(fs *pflag.FlagSet) {
			fs.StringVar(&g.imagePrefix, "image-prefix", envOr(env("KPT_IMAGE_PREFIX"), imageref.DefaultPrefix), "prefix for image names without a '/'; '' for none (KPT_IMAGE_PREFIX)")
		}},
		{scopeRun, func(fs *pflag.FlagSet) {
			fs.DurationVar(&g.fnTimeout, "fn-timeout", envDuration(env("KPTR_FN_TIMEOUT"), 5*time.Minute), "time limit of one function run (KPTR_FN_TIMEOUT)")
			fs.StringVar(&g.sandbox, "sandbox", envOr(env("KPTR_SANDBOX"), "auto"), "auto (the namespace tier, else the landlock tier, else refuse), namespace, landlock, wasm (wasm function images only), or none (run functions unsandboxed) (KPTR_SANDBOX)")
			fs.StringVar(&g.memo, "memo", strings.TrimSpace(env("KPTR_MEMO")), "on or off: replay the recorded result of an identical earlier run of a function image (by digest, no network, no mounts) instead of running it; default on for generate, off for fn render and fn eval (KPTR_MEMO)")
		}},
		{scopeLog, func(fs *pflag.FlagSet) {
			fs.StringVar(&g.logLevel, "log-level", envOr(env("KPTR_LOG_LEVEL"), "info"), "debug, info, warn or error (KPTR_LOG_LEVEL)")
		}},
	}
}

// settingGroup is the settings of one scope.
type settingGroup struct {
	scope scope
	add   func(fs *pflag.FlagSet)
}

// Flag annotations: globalFlag marks a shared setting that applies to the
// command (listed under "Global flags", checked by checkSettings); the
// others are hidden and accepted only so that existing command lines keep
// working (`kptr cache ls --offline`).
const globalFlag = "kptr-global"

// unusedFlag marks a shared setting that does not apply to the command: its
// variable is not read there, so not checked either (a bad KPTR_FN_TIMEOUT
// does not stop `kptr version`).
const unusedFlag = "kptr-global-unused"

// addSettings puts every shared setting on fs: those of the scopes in use
// shown (unless hide, as in kpt's help) and checked, the others hidden. Each
// command gets copies of flags made once (sharedFlags): every command of the
// tree carries every setting, and making each setting's flag anew for each
// of them was a fifth of `kptr version`'s CPU.
func (g *globals) addSettings(fs *pflag.FlagSet, use scope, hide bool) {
	for _, s := range g.sharedFlags() {
		f := *s.flag // the same Value: the setting's one variable
		if s.scope&use != 0 {
			f.Annotations, f.Hidden = globalAnnotation, hide
		} else {
			f.Annotations, f.Hidden = unusedAnnotation, true
		}
		fs.AddFlag(&f)
	}
}

// The annotations addSettings gives a setting's flag; shared, never changed.
var (
	globalAnnotation = map[string][]string{globalFlag: nil}
	unusedAnnotation = map[string][]string{unusedFlag: nil}
)

// sharedFlag is a shared setting's flag as settings declares it, with its
// scope.
type sharedFlag struct {
	scope scope
	flag  *pflag.Flag
}

// sharedFlags makes the shared settings' flags, once per globals.
func (g *globals) sharedFlags() []sharedFlag {
	if g.shared == nil {
		for _, grp := range g.settings() {
			sub := pflag.NewFlagSet("", pflag.ContinueOnError)
			grp.add(sub)
			sub.VisitAll(func(f *pflag.Flag) { g.shared = append(g.shared, sharedFlag{grp.scope, f}) })
		}
	}
	return g.shared
}

// applies reports whether the shared setting name applies to the command
// whose flags are fs.
func applies(fs *pflag.FlagSet, name string) bool {
	f := fs.Lookup(name)
	if f == nil {
		return false
	}
	_, ok := f.Annotations[globalFlag]
	return ok
}

// flagUsages renders either the shared settings or the command's own flags.
func flagUsages(fs *pflag.FlagSet, global bool) string {
	sub := pflag.NewFlagSet("", pflag.ContinueOnError)
	sub.SortFlags = false
	fs.VisitAll(func(f *pflag.Flag) {
		if _, ok := f.Annotations[globalFlag]; ok == global && !f.Hidden {
			sub.AddFlag(f)
		}
	})
	return sub.FlagUsages()
}

// settingFrom names where a shared setting's value came from: its flag, or
// its variable (the flag when given, or when the variable is unset).
func (g *globals) settingFrom(flag, env string) string {
	if (g.flags != nil && g.flags.Changed(flag)) || g.getenv(env) == "" {
		return "--" + flag
	}
	return env + " (--" + flag + ")"
}

// envInUsage is the variable a flag's usage names as its default
// ("(KPTR_FN_TIMEOUT)"): its first word that is KPT_ or KPTR_ followed by
// capitals, digits and underscores ("" if none). Read for every flag of
// every command run, so a scan rather than a regular expression.
func envInUsage(usage string) string {
	word := func(c byte) bool {
		return c == '_' || '0' <= c && c <= '9' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z'
	}
	for i := 0; i < len(usage); i++ {
		if !word(usage[i]) {
			continue
		}
		j := i
		for j < len(usage) && word(usage[j]) {
			j++
		}
		w := usage[i:j]
		rest, ok := strings.CutPrefix(w, "KPTR_")
		if !ok {
			rest, ok = strings.CutPrefix(w, "KPT_")
		}
		if ok && rest != "" && strings.Trim(rest, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") == "" {
			return w
		}
		i = j
	}
	return ""
}

// checkSettings refuses, before anything runs, a global setting that would
// otherwise fail later as a function failure (exit 125 per function) or be
// silently replaced by its default: a bool, duration or number variable that
// does not parse (KPTR_FN_TIMEOUT=5 minutes, KPTR_OFFLINE=yes), an unknown
// pull policy, sandbox, progress or log level, a malformed mirror. Only the
// settings that apply to the command are checked (a bad KPTR_FN_TIMEOUT does
// not stop `kptr version`). The message names the flag or the variable the
// value came from.
func (g *globals) checkSettings(fs *pflag.FlagSet) error {
	g.flags = fs
	var bad error
	fs.VisitAll(func(f *pflag.Flag) {
		if _, unused := f.Annotations[unusedFlag]; bad != nil || f.Changed || unused {
			return
		}
		env := envInUsage(f.Usage)
		if env == "" {
			return
		}
		v := strings.TrimSpace(g.getenv(env))
		if v == "" {
			return
		}
		var err error
		switch f.Value.Type() {
		case "bool":
			_, err = parseBool(v)
		case "duration":
			_, err = time.ParseDuration(v)
		case "int", "int64":
			_, err = strconv.ParseInt(v, 10, 64)
		}
		if err != nil {
			want := map[string]string{"bool": "true or false (or 1, 0)", "duration": "a duration such as 90s or 5m", "int": "a whole number", "int64": "a whole number"}
			bad = usageError("%s (--%s): want %s, got %q", env, f.Name, want[f.Value.Type()], v)
		}
	})
	if bad != nil {
		return bad
	}
	from := g.settingFrom
	on := func(flag string) bool { return applies(fs, flag) }
	if on("cache-dir") && (fs.Changed("cache-dir") || g.cacheDir != "") && strings.TrimSpace(g.cacheDir) == "" {
		// Open("") would make the current directory the cache (a user's
		// package, with `cache prune` removing files from it).
		return usageError("--cache-dir: empty; name a directory (or leave the flag out for the default)")
	}
	if on("fn-timeout") && g.fnTimeout <= 0 {
		// The sandbox would kill every function at once ("timed out after 0s").
		return usageError("%s: want a positive duration, got %s", from("fn-timeout", "KPTR_FN_TIMEOUT"), g.fnTimeout)
	}
	if on("registry-timeout") && g.regTimeout <= 0 {
		return usageError("%s: want a positive duration, got %s", from("registry-timeout", "KPTR_REGISTRY_TIMEOUT"), g.regTimeout)
	}
	if _, err := cache.ParsePullPolicy(g.pullPolicy); on("image-pull-policy") && err != nil {
		return usageError("%s: %v", from("image-pull-policy", "KPTR_IMAGE_PULL_POLICY"), err)
	}
	for _, m := range g.mirrors {
		if _, err := imageref.ParseMirror(m); on("mirror") && err != nil {
			return usageError("%s: %v", from("mirror", "KPTR_MIRRORS"), err)
		}
	}
	for _, h := range g.insecure {
		// Matched against the registry host of each pull: a scheme, path or
		// credentials would never match (and must not be echoed).
		if on("insecure-registry") && strings.ContainsAny(h, "/@") {
			shown := fmt.Sprintf("%q", h)
			if strings.Contains(h, "@") {
				shown = "(value with credentials, not shown)"
			}
			return usageError("%s: want a registry HOST[:PORT] (e.g. registry.local:5000), got %s", from("insecure-registry", "KPTR_INSECURE_REGISTRIES"), shown)
		}
	}
	if _, err := fnenv.ParseSandbox(g.sandbox, from("sandbox", "KPTR_SANDBOX")); on("sandbox") && err != nil {
		return err
	}
	switch g.memo {
	case memoOn, memoOff, "":
	default:
		if !on("memo") {
			break
		}
		return usageError("%s: want on or off, got %q", from("memo", "KPTR_MEMO"), g.memo)
	}
	switch g.progress {
	case "auto", "plain", "none", "":
	default:
		if !on("progress") {
			break
		}
		return usageError("%s: want auto, plain or none, got %q", from("progress", "KPTR_PROGRESS"), g.progress)
	}
	// KPTR_FN_MAX_OUTPUT and the output limits have no flag: the commands
	// that run functions read them.
	if v := strings.TrimSpace(g.getenv("KPTR_FN_MAX_OUTPUT")); on("fn-timeout") && v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err != nil || n < 0 {
			return usageError("KPTR_FN_MAX_OUTPUT: want a number of bytes, got %q", v)
		}
	}
	for _, name := range envOnlyBools {
		if v := g.getenv(name); on("sandbox") && strings.TrimSpace(v) != "" {
			if _, err := parseBool(v); err != nil {
				return usageError("%s: %v", name, err)
			}
		}
	}
	for _, name := range slices.Concat(outputLimitVars, resultBudgetVars, packageLimitVars) {
		if v := strings.TrimSpace(g.getenv(name)); on("fn-timeout") && v != "" {
			if n, err := strconv.Atoi(v); err != nil || n < 0 {
				return usageError("%s: want a whole number (0 for the default), got %q", name, v)
			}
		}
	}
	if raw := g.getenv("KPTR_SIGNATURE_POLICY"); on("signature-policy") && !fs.Changed("signature-policy") && raw != "" && strings.TrimSpace(raw) == "" {
		// as --signature-policy '' is: blanks are a mistake (a templated
		// value that came out empty), never "no policy"
		return usageError("KPTR_SIGNATURE_POLICY (--signature-policy): blank; name a containers-policy.json file (or unset the variable for none)")
	}
	if on("signature-policy") && strings.TrimSpace(g.sigPolicyPath) != "" {
		p, err := signature.Load(strings.TrimSpace(g.sigPolicyPath))
		if err != nil {
			return usageError("%s: %v", from("signature-policy", "KPTR_SIGNATURE_POLICY"), err)
		}
		g.sigPolicy = p
	} else if on("signature-policy") && fs.Changed("signature-policy") {
		return usageError("--signature-policy: empty; name a containers-policy.json file (or leave the flag out for none)")
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(g.logLevel)); on("log-level") && err != nil {
		return usageError("%s: want debug, info, warn or error, got %q", from("log-level", "KPTR_LOG_LEVEL"), g.logLevel)
	}
	return nil
}

// outputLimitVars set pipeline.OutputLimits: what kptr reads from one
// function's stdout beyond its size in bytes (0 or unset: the default).
var outputLimitVars = []string{"KPTR_FN_MAX_ITEMS", "KPTR_FN_MAX_RESULTS", "KPTR_FN_MAX_NODES"}

// resultBudgetVars set pipeline.ResultBudget: the results one render holds
// over all its functions (0 or unset: the default).
var resultBudgetVars = []string{"KPTR_MAX_RESULTS", "KPTR_MAX_RESULT_BYTES"}

// resultBudget reads resultBudgetVars (checkSettings has validated them).
func (g *globals) resultBudget() pipeline.ResultBudget {
	n := func(name string) int {
		v, _ := strconv.Atoi(strings.TrimSpace(g.getenv(name)))
		return v
	}
	return pipeline.ResultBudget{MaxResults: n("KPTR_MAX_RESULTS"), MaxBytes: int64(n("KPTR_MAX_RESULT_BYTES"))}
}

// packageLimitVars set pipeline.PackageLimits: what kptr reads from the
// files of the package tree it renders (0 or unset: the default).
var packageLimitVars = []string{"KPTR_PKG_MAX_BYTES", "KPTR_PKG_MAX_NODES"}

// packageLimits reads packageLimitVars (checkSettings has validated them).
func (g *globals) packageLimits() pipeline.PackageLimits {
	n := func(name string) int {
		v, _ := strconv.Atoi(strings.TrimSpace(g.getenv(name)))
		return v
	}
	return pipeline.PackageLimits{MaxBytes: int64(n("KPTR_PKG_MAX_BYTES")), MaxNodes: n("KPTR_PKG_MAX_NODES")}
}

// outputLimits reads outputLimitVars (checkSettings has validated them).
func (g *globals) outputLimits() pipeline.OutputLimits {
	n := func(name string) int {
		v, _ := strconv.Atoi(strings.TrimSpace(g.getenv(name)))
		return v
	}
	return pipeline.OutputLimits{MaxItems: n("KPTR_FN_MAX_ITEMS"), MaxResults: n("KPTR_FN_MAX_RESULTS"), MaxNodes: n("KPTR_FN_MAX_NODES")}
}

// logger logs structured lines to stderr at the chosen level.
func (g *globals) logger() *slog.Logger {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(g.logLevel)); err != nil {
		lvl = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: lvl}))
}

// isTerminal reports whether progress bars make sense on stderr.
func (g *globals) isTerminal() bool {
	switch g.progress {
	case "plain", "none":
		return false
	}
	lw, ok := g.stderr.(lockedWriter)
	if !ok {
		return false
	}
	f, ok := lw.w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// defaultCacheDir is where the cache lives unless --cache-dir says: as Go's
// os.UserCacheDir, $XDG_CACHE_HOME/kptr, else $HOME/.cache/kptr, and
// nothing ("") when neither is set. Never a shared directory such as
// /tmp/kptr-cache, which any user could create first and fill with images
// for everyone else to run (issue 9): the command then asks for a directory.
func defaultCacheDir(env func(string) string) string {
	if d := env("KPTR_CACHE_DIR"); d != "" {
		return d
	}
	if d := env("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "kptr")
	}
	if h := env("HOME"); h != "" {
		return filepath.Join(h, ".cache", "kptr")
	}
	return ""
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// prefix is --image-prefix as the cache and the pipeline take it. As in
// kpt main (d08fb0b: runneroptions.DefaultImagePrefix and ResolveToImage),
// an empty KPT_IMAGE_PREFIX keeps the default but an explicitly empty
// --image-prefix means no prefix at all.
func (g *globals) prefix() string {
	if g.imagePrefix == "" {
		return imageref.NoPrefix
	}
	return g.imagePrefix
}

func envOr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func envDuration(v string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(strings.TrimSpace(v)); err == nil {
		return d
	}
	return def
}

// memoOn says whether the command memoises function results: --memo or
// KPTR_MEMO when set, else the command's default (on for generate, off for
// fn render and fn eval).
func (g *globals) memoOn(def bool) bool {
	switch g.memo {
	case memoOn:
		return true
	case memoOff:
		return false
	}
	return def
}

// envOff reports whether a default-on variable of envOnlyBools is set off.
func (g *globals) envOff(name string) bool {
	v := strings.TrimSpace(g.getenv(name))
	return v != "" && !envBool(v)
}
