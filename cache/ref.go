package cache

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/Masterminds/semver/v3"
	"github.com/google/go-containerregistry/pkg/name"
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
	s = strings.TrimSpace(s)
	if s == "" {
		return imageRef{}, usageErr("", errors.New("empty image reference"))
	}
	named := ApplyImagePrefix(s, c.s.prefix)
	r, err := name.ParseReference(named)
	if err != nil {
		return imageRef{}, usageErr(named, fmt.Errorf("unparsable image reference: %w", err))
	}
	ir := imageRef{named: named, ref: r, key: r.Name()}
	if ir.target, err = c.rewrite(r); err != nil {
		return imageRef{}, usageErr(named, err)
	}
	return ir, nil
}

// rewrite applies the longest matching mirror and the insecure-registry list.
func (c *Cache) rewrite(r name.Reference) (name.Reference, error) {
	repo := r.Context()
	names := []string{repo.Name()}
	if repo.RegistryStr() == name.DefaultRegistry {
		names = append(names, "docker.io/"+repo.RepositoryStr())
	}
	best, bestLen, rest := "", -1, ""
	for _, m := range c.s.mirrors {
		for _, n := range names {
			if (n == m.From || strings.HasPrefix(n, m.From+"/")) && len(m.From) > bestLen {
				best, bestLen, rest = m.To, len(m.From), n[len(m.From):]
			}
		}
	}
	s := repo.Name()
	if bestLen >= 0 {
		s = best + rest
	}
	switch t := r.(type) {
	case name.Tag:
		s += ":" + t.TagStr()
	case name.Digest:
		s += "@" + t.DigestStr()
	}
	var opts []name.Option
	if host := registryOf(s); c.s.insecure[host] {
		opts = append(opts, name.Insecure)
	}
	out, err := name.ParseReference(s, opts...)
	if err != nil {
		return nil, fmt.Errorf("mirror rewrite gave %q: %w", s, err)
	}
	return out, nil
}

func registryOf(s string) string {
	host, _, _ := strings.Cut(s, "/")
	return host
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
		return "", fmt.Errorf("no tag matches constraint %q", constraint)
	}
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].v.GreaterThan(cands[j].v) })
	return cands[0].tag, nil
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
	named := ApplyImagePrefix(strings.TrimSpace(repo), c.s.prefix)
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
			err = fmt.Errorf("%w (only cached tags were considered: %s)", err, strings.Join(tags, ", "))
		}
		return "", imgErr(named, err)
	}
	return named + ":" + tag, nil
}
