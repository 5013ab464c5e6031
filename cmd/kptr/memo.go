package main

import (
	"fmt"

	"github.com/kptr-dev/kptr/cache"
	"github.com/kptr-dev/kptr/fnenv"
	"github.com/kptr-dev/kptr/memo"
	"github.com/kptr-dev/kptr/runtime"
)

// --memo / KPTR_MEMO values.
const (
	memoOn  = "on"
	memoOff = "off"
)

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

// memoRunner puts the current user's memo store for cache c in front of
// next. A store that cannot be opened (no private directory to be had)
// turns memoisation off with a warning; the render runs all the same.
func (g *globals) memoRunner(c *cache.Cache, next runtime.Runner) runtime.Runner {
	st, err := memo.OpenFor(c.Dir(), memo.Options{})
	if err != nil {
		g.logger().Warn("function results are not memoised", "err", err)
		return next
	}
	g.onExit(st.Close)
	return &memo.Runner{Next: next, Store: st, Variant: g.memoVariant()}
}

// memoVariant names the settings that decide how a function runs beyond
// its image and invocation: the sandbox tier asked for and the overlay
// switch (a read-only image can fail a function a writable one does not).
func (g *globals) memoVariant() string {
	sb, _ := fnenv.ParseSandbox(g.sandbox, "--sandbox")
	overlay := "" // on unless set off (the key of a default run is unchanged)
	if g.envOff("KPTR_OVERLAY") {
		overlay = "0"
	}
	return "sandbox=" + sb + ";overlay=" + overlay
}

// listMemo ends cache ls with the current user's memoised results, when
// there are any.
func (g *globals) listMemo(c *cache.Cache) {
	st, err := memo.OpenFor(c.Dir(), memo.Options{})
	if err != nil {
		return
	}
	defer st.Close()
	if u, err := st.Usage(); err == nil && u.Records > 0 {
		fmt.Fprintf(g.stdout, "memoised results: %d (%s) in %s\n", u.Records, humanBytes(u.Bytes), st.Dir())
	}
}

// pruneMemo prunes the current user's memoised results as cache prune
// prunes images, and says what it removed (verb: removed, would remove).
func (g *globals) pruneMemo(c *cache.Cache, o memo.PruneOptions, verb string) error {
	st, err := memo.OpenFor(c.Dir(), memo.Options{})
	if err != nil {
		return nil // nothing memoised can be there to prune
	}
	defer st.Close()
	rep, err := st.Prune(o)
	if rep.Removed.Records > 0 {
		fmt.Fprintf(g.stdout, "%s %d memoised result(s) (%s); %d left (%s)\n", verb, rep.Removed.Records, humanBytes(rep.Removed.Bytes), rep.Left.Records, humanBytes(rep.Left.Bytes))
	}
	if err != nil {
		return withCode(exitEnv, fmt.Errorf("pruning memoised results in %s: %w", st.Dir(), err))
	}
	return nil
}
