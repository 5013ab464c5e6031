package namespace

import (
	"encoding/json"
	"errors"
	"reflect"

	"github.com/kptr-dev/kptr/runtime"
)

// Tiers whose verdicts are cached.
const verdictNamespace = "namespace"

// tierVerdict is what the namespace tier keeps with its cached verdict.
type tierVerdict struct {
	Features Features // HardLimits are read afresh
	// OverlayErr is the overlay step's error ("" when it worked): New's
	// overlayCheck for the default state directory answers from it.
	OverlayErr string `json:",omitempty"`
}

// The probes behind the cache; tests count or replace them.
var probeNamespace = Probe

// ProbeCached is Probe with its verdict cached per kernel, user,
// confinement and state directory (see the comment at the top of
// verdict.go): cached reports whether the verdict came from the cache
// (no probe child was started). fresh forces a probe whose verdict then
// replaces the cached one.
func ProbeCached(fresh bool) (results []runtime.ProbeResult, f Features, cached bool) {
	dir := runtime.DefaultStateDir()
	if runtime.EnsurePrivateDir(dir) != nil {
		results, f = probeNamespace()
		return results, f, false
	}
	key, ok := runtime.VerdictKeyNow(verdictNamespace, dir, "")
	if ok && !fresh {
		var nv tierVerdict
		if v, hit := runtime.LoadVerdict(key); hit && json.Unmarshal(v.Tier, &nv) == nil {
			f = nv.Features
			f.HardLimits = hardLimits()
			var ovErr error
			if nv.OverlayErr != "" {
				ovErr = errors.New(nv.OverlayErr)
			}
			overlayVerified.LoadOrStore(dir, ovErr)
			return v.Results, f, true
		}
	}
	results, f = probeNamespace()
	if ok {
		nv := tierVerdict{Features: f}
		nv.Features.HardLimits = nil
		if e, known := overlayVerified.Load(dir); known {
			if err, _ := e.(error); err != nil {
				nv.OverlayErr = err.Error()
			}
		} else if !f.Overlay {
			nv.OverlayErr = "not probed"
		}
		v := runtime.Verdict{Key: key, Results: results}
		v.Tier, _ = json.Marshal(nv)
		runtime.KeepVerdict(v)
	}
	return results, f, false
}

// sameVerdict says whether two probe outcomes would make runs behave the
// same.
func sameVerdict(a, b []runtime.ProbeResult, fa, fb Features) bool {
	fa.HardLimits, fb.HardLimits = nil, nil
	return reflect.DeepEqual(a, b) && reflect.DeepEqual(fa, fb)
}
