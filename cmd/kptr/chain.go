package main

import (
	"context"
	"errors"
	"log/slog"

	"github.com/kptr-dev/kptr/cache"
	"github.com/kptr-dev/kptr/fnenv"
	"github.com/kptr-dev/kptr/imageref"
)

// The function environment of a command (package fnenv builds it): here
// the shared settings are read into its configuration, and the cache it
// pulls through is opened as they describe.

// fnEnv is the chain the shared settings describe, with memo on or off
// and wasm allowed or not as the command decided, and the operator's
// policy (nil: none). Build it after the command has settled its settings
// (generate's log level and narrowed function timeout, docker's pull
// policy).
func (g *globals) fnEnv(memo, allowWasm bool, pol *fnenv.Policy) *fnenv.Env {
	return fnenv.New(g.fnConfig(memo, allowWasm, pol))
}

// fnConfig is fnEnv's configuration, for a command that changes some of it.
func (g *globals) fnConfig(memo, allowWasm bool, pol *fnenv.Policy) fnenv.Config {
	return fnenv.Config{
		Sandbox:    g.sandbox,
		NoOverlay:  g.envOff("KPTR_OVERLAY"),
		NoPrepare:  g.envOff("KPTR_PREPARE"),
		AllowWasm:  allowWasm,
		WasmNotice: g.progress != "none",
		FnTimeout:  g.fnTimeout,
		MaxOutput:  g.maxFnOutput(),
		Limits:     g.outputLimits(),
		Results:    g.resultBudget(),
		PkgLimits:  g.packageLimits(),
		Policy:     pol,
		Signature:  g.sigPolicy,
		Memo:       memo,
		OpenCache: func(extra ...cache.Option) (*cache.Cache, error) {
			return g.openCacheWith(g.progressLevel(), extra...)
		},
		CacheDir:    g.cacheDir,
		ImagePrefix: g.prefix(),
		PullPolicy:  g.pullPolicy,
		Offline:     g.offline,
		Log:         g.logger(),
		Stderr:      g.stderr,
		OnExit:      g.onExit,
	}
}

// maxFnOutput is KPTR_FN_MAX_OUTPUT: a function's stdout and stderr, in
// bytes (0: the default).
func (g *globals) maxFnOutput() int64 {
	return envInt64(g.getenv("KPTR_FN_MAX_OUTPUT"), 0)
}

// openCache opens the image cache the global flags describe. Pull progress
// is drawn as bars on a terminal; otherwise it is logged at debug level (so
// render's kpt transcript on stderr stays exact) unless --progress=plain.
func (g *globals) openCache(context.Context) (*cache.Cache, error) {
	return g.openCacheWith(g.progressLevel())
}

// progressLevel is the level of plain progress lines: info with
// --progress=plain, else debug.
func (g *globals) progressLevel() slog.Level {
	if g.progress == "plain" {
		return slog.LevelInfo
	}
	return slog.LevelDebug
}

// openCacheWith opens the cache logging plain progress lines at lvl.
func (g *globals) openCacheWith(lvl slog.Level, extra ...cache.Option) (*cache.Cache, error) {
	// The pull settings of a command that never pulls (cache ls, tag,
	// verify, prune) are accepted and ignored, as every setting that does
	// not apply to a command is; where they apply, checkSettings has
	// refused a bad one already, naming its flag or its variable.
	pulls := g.flags == nil || applies(g.flags, "mirror")
	policy := cache.PullIfNotPresent
	var mirrors []imageref.Mirror
	if pulls {
		var err error
		if policy, err = cache.ParsePullPolicy(g.pullPolicy); err != nil {
			return nil, usageError("%s: %v", g.settingFrom("image-pull-policy", "KPTR_IMAGE_PULL_POLICY"), err)
		}
		for _, m := range g.mirrors {
			mm, err := imageref.ParseMirror(m)
			if err != nil {
				return nil, usageError("%s: %v", g.settingFrom("mirror", "KPTR_MIRRORS"), err)
			}
			mirrors = append(mirrors, mm)
		}
	}
	if g.cacheDir == "" {
		return nil, withCode(exitEnv, errors.New("no cache directory: KPTR_CACHE_DIR, XDG_CACHE_HOME and HOME are all unset; set one of them or pass --cache-dir"))
	}
	log := g.logger()
	opts := []cache.Option{
		cache.WithTimeout(g.regTimeout),
		cache.WithMirrors(mirrors...),
		cache.WithInsecureRegistries(g.insecure...),
		cache.WithPullPolicy(policy),
		cache.WithOffline(g.offline),
		cache.WithImagePrefix(g.prefix()),
		cache.WithLogger(log),
		cache.WithSignaturePolicy(g.sigPolicy),
	}
	switch {
	case g.progress == "none":
	case g.isTerminal():
		opts = append(opts, cache.WithProgress(&barProgress{w: g.stderr}))
	default:
		opts = append(opts, cache.WithProgress(&logProgress{log: log, lvl: lvl}))
	}
	c, err := cache.Open(g.cacheDir, append(opts, extra...)...)
	if err != nil {
		return nil, withCode(exitEnv, err)
	}
	// what this process's pulls left in tmp/ (one a signal interrupted)
	g.onExit(func() error { c.RemoveOwnTemporaries(); return nil })
	return c, nil
}
