package main

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"runtime/debug"
	"time"

	"github.com/kptr-dev/kptr/cache"
	"github.com/kptr-dev/kptr/internal/dirfs"
	"github.com/kptr-dev/kptr/memo"
	"github.com/kptr-dev/kptr/pipeline"
	"github.com/kptr-dev/kptr/runtime"
)

// A whole generate is memoised too (on with --memo, like its functions):
// an unchanged Application is replayed without reading its resources as
// YAML, running or replaying any function, or starting the sandbox. Its
// key covers everything the manifests are a function of:
//
//   - every file and directory of the application's tree (path, type,
//     mode, content; memo.KeyBuilder.Tree); a tree with a symbolic link or
//     a special file is not memoised as a whole;
//   - the manifest digest each Kptfile image resolves to now, through the
//     cache alone (an image not cached, a tag constraint, or
//     --image-pull-policy Always: not memoised as a whole);
//   - the operator's policy after the app's parameters (allow-list, limits,
//     annotation domain), the app metadata the manifests carry (only with an
//     annotation domain: the revision changes on every commit), the global
//     settings a render reads (image prefix, function timeout and output
//     limits, sandbox choice);
//   - kptr itself (its Go build ID and module version): another build may
//     render differently.
//
// A policy that allows exec functions or network is never memoised as a
// whole (nor are such functions). Only a successful generate is recorded;
// the record is the manifests it printed. The records share the function
// memo's store, bounds and guarantees (package memo).

// appMemo is a whole generate's key and the store to look it up in.
type appMemo struct {
	st  *memo.Store
	key memo.Key
}

// openAppMemo computes the key of generating the app at dir under p; nil
// when the app cannot be memoised as a whole (or memo is off).
func (g *globals) openAppMemo(ctx context.Context, p *policy, dir string) *appMemo {
	if !g.memoOn(true) || p.AllowExec || p.AllowNetwork {
		return nil
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil
	}
	defer root.Close()
	images, err := pipeline.Images(dir, pipeline.Options{ImagePrefix: g.imagePrefix})
	if err != nil {
		return nil
	}
	allow := &allowListResolver{patterns: p.AllowedImages}
	files := dirfs.New(root)
	defer files.Close()
	k, st := g.wholeKey(ctx, "generate", files, images, allow.check)
	if k == nil {
		return nil
	}
	k.Str("policy", fmt.Sprintf("%+v", *p))
	if p.AnnotationDomain != "" {
		// only then in the manifests (the revision changes on every commit)
		k.Str("metadata", fmt.Sprintf("%q", appMetadata(g.getenv)))
	}
	return &appMemo{st: st, key: k.Sum()}
}

// wholeKey starts the key of a whole render or generate (kind) of the tree
// fsys, whose Kptfiles name images, and opens the store to look it up in:
// kptr's build, every entry of the tree, the manifest digest each image
// resolves to now through the cache alone, and the global settings every
// render reads (image prefix, function timeout and output limits, sandbox
// choice); the caller adds its own. nil when it cannot be memoised as a
// whole: pull policy Always, an unknown build, a tree with a link or a
// special file, an image allow refuses (the render fails) or that is not
// cached, no private store.
func (g *globals) wholeKey(ctx context.Context, kind string, fsys fs.FS, images []string, allow func(string) error) (*memo.KeyBuilder, *memo.Store) {
	if pp, err := cache.ParsePullPolicy(g.pullPolicy); err != nil || pp == cache.PullAlways {
		return nil, nil
	}
	id := kptrBuildID()
	if id == "" {
		return nil, nil
	}
	k := memo.NewKey(kind)
	k.Str("kptr", id)
	if !k.Tree(fsys) {
		return nil, nil
	}
	c, err := g.openCacheWith(slog.LevelDebug, cache.WithOffline(true), cache.WithProgress(nil))
	if err != nil {
		return nil, nil
	}
	defer c.Close()
	for _, ref := range images {
		if allow != nil && allow(ref) != nil {
			return nil, nil // the render fails; nothing to replay
		}
		b, err := c.Resolve(ctx, ref)
		if err != nil {
			return nil, nil
		}
		k.Str("image", ref+"@"+b.Digest.String())
	}
	k.Str("image-prefix", g.imagePrefix)
	k.Str("fn-timeout", g.fnTimeout.String())
	k.Str("fn-max-output", g.getenv("KPTR_FN_MAX_OUTPUT"))
	k.Str("output-limits", fmt.Sprintf("%+v", g.outputLimits()))
	k.Str("result-budget", fmt.Sprintf("%+v", g.resultBudget()))
	k.Str("package-limits", fmt.Sprintf("%+v", g.packageLimits()))
	k.Str("variant", g.memoVariant())
	if g.sigPolicy != nil {
		// each image above was also allowed by this very policy
		k.Str("signature-policy", g.sigPolicy.Hash)
	}
	st, err := memo.OpenFor(c.Dir(), memo.Options{})
	if err != nil {
		g.logger().Warn("function results are not memoised", "err", err)
		return nil, nil
	}
	g.onExit(st.Close)
	return k, st
}

// generateMemoised is generate with the app memoised as a whole when it
// can be: a recorded success is replayed, a new one recorded.
func generateMemoised(ctx context.Context, g *globals, p *policy, dir string) ([]byte, error) {
	m := g.openAppMemo(ctx, p, dir)
	if m != nil {
		if rec, ok := m.st.Get(m.key); ok && (p.Timeout <= 0 || rec.Duration < p.Timeout) {
			g.logger().Debug("replayed the recorded manifests of this unchanged application (memo)", "dir", displayPath(dir), "bytes", len(rec.Stdout))
			return rec.Stdout, nil
		}
	}
	t0 := time.Now()
	out, err := generate(ctx, g, p, dir)
	if m != nil && err == nil && ctx.Err() == nil {
		_ = m.st.Put(m.key, memo.Record{Stdout: out, Duration: time.Since(t0)})
	}
	return out, err
}

// kptrBuildID identifies this kptr build: the Go build ID of the running
// binary (any change of its code changes it, runtime.BuildID) and its module
// version; "" when unknown (nothing is then memoised as a whole).
func kptrBuildID() string {
	id := runtime.BuildID()
	if id == "" {
		return ""
	}
	v := ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		v = bi.Main.Version + " " + bi.GoVersion
	}
	return id + " " + v
}
