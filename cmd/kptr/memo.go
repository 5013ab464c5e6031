package main

import (
	"fmt"

	"github.com/kptr-dev/kptr/cache"
	"github.com/kptr-dev/kptr/memo"
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
