package fnenv

import (
	"context"
	"fmt"
	"io/fs"
	"runtime/debug"
	"strconv"

	"github.com/kptr-dev/kptr/cache"
	"github.com/kptr-dev/kptr/imageref"
	"github.com/kptr-dev/kptr/memo"
	"github.com/kptr-dev/kptr/runtime"
)

// variant names the settings that decide how a function runs beyond its
// image and invocation: the sandbox tier asked for and the overlay switch
// (a read-only image can fail a function a writable one does not).
func (e *Env) variant() string {
	sb, _ := ParseSandbox(e.cfg.Sandbox, "--sandbox")
	overlay := "" // on unless set off (the key of a default run is unchanged)
	if e.cfg.NoOverlay {
		overlay = "0"
	}
	return "sandbox=" + sb + ";overlay=" + overlay
}

// WholeKey starts the key of a whole render or generate (kind) of the tree
// fsys, whose Kptfiles name images, and opens the store to look it up in:
// TreeKey, then ImagesKey. nil when it cannot be memoised as a whole (see
// both).
func (e *Env) WholeKey(ctx context.Context, kind string, fsys fs.FS, images []string) (*memo.KeyBuilder, *memo.Store) {
	t, ok := e.TreeKey(kind, fsys)
	if !ok {
		return nil, nil
	}
	return e.ImagesKey(ctx, t, images)
}

// Tree is the half of a whole key read from the package tree (TreeKey).
type Tree struct {
	kind string
	sum  memo.Key
}

// TreeKey is the half of a whole key (kind) the tree fsys decides: kptr's
// build and every entry of the tree. It is taken before the render, which
// may rewrite the tree in place, and finished by ImagesKey once the images
// are known, which may be only after the render pulled them. false when it
// cannot be memoised as a whole: pull policy Always, an unknown build, a
// tree with a link or a special file.
func (e *Env) TreeKey(kind string, fsys fs.FS) (Tree, bool) {
	if pp, err := cache.ParsePullPolicy(e.cfg.PullPolicy); err != nil || pp == cache.PullAlways {
		return Tree{}, false
	}
	id := BuildID()
	if id == "" {
		return Tree{}, false
	}
	k := memo.NewKey(kind + "-tree")
	k.Str("kptr", id)
	if !k.Tree(fsys) {
		return Tree{}, false
	}
	return Tree{kind, k.Sum()}, true
}

// ImagesKey finishes the whole key of t: the manifest digest each image
// resolves to now through the cache alone, and the chain's settings every
// render reads (image prefix, function timeout and output limits, sandbox
// choice, signature policy); the caller adds its own. It also opens the
// store to look the key up in. nil when it cannot be memoised as a whole
// (yet): an image the operator's policy refuses (the render fails) or that
// is not cached, no private store.
func (e *Env) ImagesKey(ctx context.Context, t Tree, images []string) (*memo.KeyBuilder, *memo.Store) {
	if t.kind == "" {
		return nil, nil
	}
	k := memo.NewKey(t.kind)
	k.Bytes("tree", t.sum[:])
	// a view of its own, opened now: the images a render pulled since the
	// last look are there
	c, err := e.openCache(cache.WithOffline(true), cache.WithProgress(nil))
	if err != nil {
		return nil, nil
	}
	defer c.Close()
	for _, ref := range images {
		if e.cfg.Policy.CheckImage(ref) != nil {
			return nil, nil // the render fails; nothing to replay
		}
		b, err := c.Resolve(ctx, ref)
		if err != nil {
			return nil, nil
		}
		k.Str("image", ref+"@"+b.Digest.String())
	}
	prefix := e.cfg.ImagePrefix
	if prefix == imageref.NoPrefix {
		prefix = "" // as --image-prefix spells it
	}
	maxOut := ""
	if e.cfg.MaxOutput != 0 {
		maxOut = strconv.FormatInt(e.cfg.MaxOutput, 10)
	}
	k.Str("image-prefix", prefix)
	k.Str("fn-timeout", e.cfg.FnTimeout.String())
	k.Str("fn-max-output", maxOut)
	k.Str("output-limits", fmt.Sprintf("%+v", e.cfg.Limits))
	k.Str("result-budget", fmt.Sprintf("%+v", e.cfg.Results))
	k.Str("package-limits", fmt.Sprintf("%+v", e.cfg.PkgLimits))
	k.Str("variant", e.variant())
	if e.cfg.Signature != nil {
		// each image above was also allowed by this very policy
		k.Str("signature-policy", e.cfg.Signature.Hash)
	}
	st, err := memo.OpenFor(c.Dir(), memo.Options{})
	if err != nil {
		e.cfg.Log.Warn("function results are not memoised", "err", err)
		return nil, nil
	}
	e.cfg.OnExit(st.Close)
	return k, st
}

// BuildID identifies this kptr build: the Go build ID of the running
// binary (any change of its code changes it, runtime.BuildID) and its
// module version; "" when unknown (nothing is then memoised as a whole).
func BuildID() string {
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
