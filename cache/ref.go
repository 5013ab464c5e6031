package cache

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/Masterminds/semver/v3"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/kptr-dev/kptr/imageref"
	"github.com/kptr-dev/kptr/internal/lazyre"
)

// imageRef is one reference in its three spellings: as the caller named it
// (after the prefix rule), canonical (the record key) and the one actually
// fetched (after mirror rewrites).
type imageRef struct {
	named  string         // "gcr.io/kpt-fn/set-labels:v0.1.5"
	ref    name.Reference // parsed named
	key    string         // ref.Name(): canonical, the ref.name annotation
	target name.Reference // after mirrors; insecure option applied
}

func (c *Cache) parseRef(s string) (imageRef, error) {
	if strings.TrimSpace(s) == "" {
		return imageRef{}, usageErr("", errors.New("empty image reference"))
	}
	named := imageref.ApplyPrefix(strings.TrimSpace(s), c.s.prefix)
	r, err := imageref.Parse(named)
	if err != nil {
		return imageRef{}, usageErr(named, fmt.Errorf("unparsable image reference: %w", err))
	}
	ir := imageRef{named: named, ref: r.Reference, key: r.Reference.Name()}
	if ir.target, err = c.rewrite(r.Reference); err != nil {
		return imageRef{}, usageErr(named, err)
	}
	return ir, nil
}

// rewrite applies the longest matching mirror and the insecure-registry list.
func (c *Cache) rewrite(r name.Reference) (name.Reference, error) {
	s := imageref.Physical(r, c.s.mirrors)
	var opts []name.Option
	if c.s.insecure[imageref.Registry(s)] {
		opts = append(opts, name.Insecure)
	}
	out, err := name.ParseReference(s, opts...)
	if err != nil {
		return nil, fmt.Errorf("mirror rewrite gave %q: %w", s, err)
	}
	return out, nil
}

// PickTag applies kpt's rule for a Kptfile `tag:` field to a registry's tag
// list: a semver version is returned as is; a semver constraint picks the
// highest matching tag (tags starting "sha256-" or containing "-git-" are
// never candidates); anything else must be a valid tag and is returned as is.
func PickTag(tags []string, constraint string) (string, error) {
	constraint = strings.TrimSpace(constraint)
	if _, err := semver.NewVersion(constraint); err == nil {
		return constraint, nil
	}
	c, err := semver.NewConstraint(constraint)
	if err != nil {
		if _, terr := name.NewTag("x:" + constraint); terr != nil || strings.ContainsAny(constraint, "/@:") {
			return "", fmt.Errorf("tag %q is neither a semver version, a semver constraint nor a valid tag", constraint)
		}
		return constraint, nil
	}
	type cand struct {
		tag string
		v   *semver.Version
	}
	var cands []cand
	for _, t := range tags {
		if strings.HasPrefix(t, "sha256-") || strings.Contains(t, "-git-") {
			continue
		}
		v, err := semver.NewVersion(t)
		if err != nil || !c.Check(v) {
			continue
		}
		cands = append(cands, cand{t, v})
	}
	if len(cands) == 0 {
		return "", noTagMatches(tags, constraint)
	}
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].v.GreaterThan(cands[j].v) })
	return cands[0].tag, nil
}

// ErrNoTagMatch is the cause when a tag constraint matches none of the
// repository's tags: the Kptfile (or --tag) asks for something that does not
// exist, an input error (exit 2), not registry trouble.
var ErrNoTagMatch = errors.New("no tag matches")

// maxNearestTags bounds the tags a no-match error lists.
const maxNearestTags = 5

var leadingVersion = lazyre.New(`(\d+)(?:\.(\d+))?(?:\.(\d+))?`)

// noTagMatches says that no tag of tags matches constraint and lists the
// nearest semver tags, at most maxNearestTags in version order: those on
// either side of the first version the constraint names (the highest when
// it names none).
func noTagMatches(tags []string, constraint string) error {
	var vs []*semver.Version
	byVersion := map[*semver.Version]string{}
	for _, t := range tags {
		if strings.HasPrefix(t, "sha256-") || strings.Contains(t, "-git-") {
			continue
		}
		if v, err := semver.NewVersion(t); err == nil {
			vs = append(vs, v)
			byVersion[v] = t
		}
	}
	sort.SliceStable(vs, func(i, j int) bool { return vs[i].LessThan(vs[j]) })
	at := len(vs) // where the constraint's version would sit among vs
	if m := leadingVersion().FindStringSubmatch(constraint); m != nil {
		var n [3]uint64
		for i := range 3 {
			n[i], _ = strconv.ParseUint(m[i+1], 10, 64)
		}
		anchor := semver.New(n[0], n[1], n[2], "", "")
		at = sort.Search(len(vs), func(i int) bool { return !vs[i].LessThan(anchor) })
	}
	lo, hi := at, at
	for hi-lo < maxNearestTags && (lo > 0 || hi < len(vs)) {
		if lo > 0 {
			lo--
		}
		if hi-lo < maxNearestTags && hi < len(vs) {
			hi++
		}
	}
	var names []string
	for _, v := range vs[lo:hi] {
		names = append(names, byVersion[v])
	}
	switch {
	case len(tags) == 0:
		return fmt.Errorf("%w constraint %q: the repository has no tags", ErrNoTagMatch, constraint)
	case len(names) == 0:
		return fmt.Errorf("%w constraint %q: none of the repository's %d tags is a semver version", ErrNoTagMatch, constraint, len(tags))
	}
	return fmt.Errorf("%w constraint %q (the repository has %d tags; nearest: %s)", ErrNoTagMatch, constraint, len(tags), strings.Join(names, ", "))
}

// isConstraint reports whether PickTag needs the tag list for s.
func isConstraint(s string) bool {
	if _, err := semver.NewVersion(s); err == nil {
		return false
	}
	_, err := semver.NewConstraint(s)
	return err == nil
}

// ResolveConstraint turns a Kptfile image plus `tag:` into the reference to
// run, "repo:tag". repo gets the prefix rule. Only a semver constraint needs
// the registry's tag list (through mirrors); offline, or under PullNever, the
// tags recorded in the cache for repo are the list.
func (c *Cache) ResolveConstraint(ctx context.Context, repo, constraint string) (string, error) {
	named := imageref.ApplyPrefix(strings.TrimSpace(repo), c.s.prefix)
	r, err := name.NewRepository(named)
	if err != nil {
		return "", usageErr(named, fmt.Errorf("unparsable image repository: %w", err))
	}
	if !isConstraint(strings.TrimSpace(constraint)) {
		tag, err := PickTag(nil, constraint)
		if err != nil {
			return "", usageErr(named, err)
		}
		return named + ":" + tag, nil
	}
	var tags []string
	if c.s.offline || c.s.policy == PullNever {
		tags = c.cachedTags(r.Name())
	} else {
		target, err := c.rewrite(r.Tag("latest"))
		if err != nil {
			return "", usageErr(named, err)
		}
		tags, err = c.listTags(ctx, target.Context())
		if err != nil {
			return "", imgErr(named, fmt.Errorf("listing tags: %w", err))
		}
	}
	tag, err := PickTag(tags, constraint)
	if err != nil {
		if c.s.offline || c.s.policy == PullNever {
			err = fmt.Errorf("%w (offline: only the tags in the cache were considered)", err)
		}
		if errors.Is(err, ErrNoTagMatch) {
			return "", usageErr(named, err)
		}
		return "", imgErr(named, err)
	}
	return named + ":" + tag, nil
}
