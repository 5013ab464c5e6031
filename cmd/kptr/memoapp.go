package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/kptr-dev/kptr/fnenv"
	"github.com/kptr-dev/kptr/internal/dirfs"
	"github.com/kptr-dev/kptr/memo"
	"github.com/kptr-dev/kptr/pipeline"
)

// A whole generate is memoised too (on with --memo, like its functions):
// an unchanged Application is replayed without reading its resources as
// YAML, running or replaying any function, or starting the sandbox. Its
// key covers everything the manifests are a function of:
//
//   - every file and directory of the application's tree (path, type,
//     mode, content; memo.KeyBuilder.Tree); a tree with a symbolic link or
//     a special file is not memoised as a whole;
//   - the manifest digest each Kptfile image resolves to through the cache
//     alone (an image not cached yet: once generate pulled it; a tag
//     constraint or --image-pull-policy Always: not memoised as a whole);
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

// openAppMemo computes the key of generating the app at dir under p
// through env; nil when the app cannot be memoised as a whole (or memo is
// off).
func (g *globals) openAppMemo(ctx context.Context, env *fnenv.Env, p *policy, dir string) *appMemo {
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
	files := dirfs.New(root)
	defer files.Close()
	k, st := env.WholeKey(ctx, "generate", files, images)
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

// generateMemoised is generate with the app memoised as a whole when it
// can be: a recorded success is replayed, a new one recorded. A generate
// that pulled an image (not cached when it started, so no key then) is
// keyed once it succeeded, on the images it pulled: the next generate of
// the unchanged app is a replay, not a second render.
func generateMemoised(ctx context.Context, g *globals, env *fnenv.Env, p *policy, dir string) ([]byte, error) {
	m := g.openAppMemo(ctx, env, p, dir)
	if m != nil {
		if rec, ok := m.st.Get(m.key); ok && (p.Timeout <= 0 || rec.Duration < p.Timeout) {
			g.logger().Debug("replayed the recorded manifests of this unchanged application (memo)", "dir", displayPath(dir), "bytes", len(rec.Stdout))
			return rec.Stdout, nil
		}
	}
	t0 := time.Now()
	out, err := generate(ctx, g, env, p, dir)
	if err != nil || ctx.Err() != nil {
		return out, err
	}
	if m == nil {
		m = g.openAppMemo(ctx, env, p, dir)
	}
	if m != nil {
		_ = m.st.Put(m.key, memo.Record{Stdout: out, Duration: time.Since(t0)})
	}
	return out, nil
}
