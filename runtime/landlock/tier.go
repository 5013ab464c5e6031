package landlock

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kptr-dev/kptr/bundle"
	"github.com/kptr-dev/kptr/runtime"
)

func init() {
	runtime.Register(tier{})
	runtime.RegisterChild(landlockProbeArg, func(args []string) {
		if len(args) > 0 {
			landlockProbeMain(args[0])
		}
		os.Exit(2)
	})
}

// Name is the tier's name (--sandbox=landlock).
const Name = "landlock"

// tier is the landlock tier as runtime.Tier.
type tier struct{}

func (tier) Info() runtime.TierInfo {
	return runtime.TierInfo{
		Name:    Name,
		Summary: "no namespaces: a child of kptr confined by Landlock, seccomp and rlimits",
		Auto:    2,
		Caveat:  "no namespaces: functions cannot read their own image's files by absolute path",
	}
}

func (tier) Probe(stateDir string, fresh bool) []runtime.ProbeResult {
	if stateDir == "" {
		stateDir = runtime.DefaultStateDir()
	}
	results, _ := ProbeCached(stateDir, fresh)
	return results
}

func (tier) Open(opts ...runtime.Option) (runtime.Sandbox, error) {
	s, err := New(opts...)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Prepare does nothing: a landlock run has nothing to set up ahead that
// would not cost the same at its start.
func (l *Sandbox) Prepare(context.Context, bundle.Bundle, runtime.Invocation) {}

// Close does nothing: a landlock run holds nothing once Run returns.
func (l *Sandbox) Close() error { return nil }

var _ runtime.Sandbox = (*Sandbox)(nil)

// Report names what a function cannot do in this tier.
func (tier) Report(string) []string {
	return []string{"note: in the landlock tier the image is not the function's root: absolute paths resolve against the host and are denied, so a function that reads its own image's files by absolute path fails"}
}

// CheckImageDir is the tier's "cache" probe: as root the tier runs each
// function as an unprivileged host uid (runtime.CanMapRange), which must
// traverse every directory above the image's rootfs; a cache under a 0700
// home (root's default, $HOME/.cache/kptr) is out of its reach, and every
// function would fail at its start.
func (tier) CheckImageDir(dir string) runtime.ProbeResult {
	r := runtime.ProbeResult{Name: "cache", Status: runtime.StatusOK, Detail: "images run from " + dir + ", within reach of the uids functions run as"}
	if !runtime.CanMapRange() {
		return r
	}
	if blocked := untraversableAbove(dir); blocked != "" {
		r.Status = runtime.StatusFailed
		r.Detail = fmt.Sprintf("the landlock tier cannot run images from the cache %s: %s is not traversable by other users, and as root this tier runs functions as an unprivileged uid that must reach the image", dir, blocked)
		r.Fix = fmt.Sprintf("use a cache directory whose whole path every user may traverse (--cache-dir / KPTR_CACHE_DIR, e.g. /var/cache/kptr), or chmod o+x %s", blocked)
	}
	return r
}

// untraversableAbove returns the first existing directory on dir's path
// (dir itself, or its nearest existing ancestor, up to /) that other users
// cannot traverse (no o+x), "" when there is none. A directory not yet
// created is judged by the ancestors it will be created in (the cache
// creates its directories 0755).
func untraversableAbove(dir string) string {
	d, err := filepath.Abs(dir)
	if err != nil {
		return dir
	}
	for {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o001 == 0 {
			return d
		}
		if d == "/" {
			return ""
		}
		d = filepath.Dir(d)
	}
}
