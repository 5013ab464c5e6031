package signature

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/kptr-dev/kptr/imageref"
)

// ref is an image reference in containers/image's normalised spelling
// (docker.io/library/busybox), remembering whether it carried a tag or a
// digest (go-containerregistry would add :latest to a bare name).
type ref struct {
	repo   string // registry/path
	tag    string
	digest string
}

func (r ref) String() string {
	switch {
	case r.digest != "":
		return r.repo + "@" + r.digest
	case r.tag != "":
		return r.repo + ":" + r.tag
	}
	return r.repo
}

// parseRef parses s as containers/image would (a name without registry is
// on docker.io, a docker.io name without namespace in library/), through
// imageref; a digest must be sha256's.
func parseRef(s string) (ref, error) {
	r, err := imageref.Parse(s)
	if err != nil {
		return ref{}, fmt.Errorf("reference %q: %w", s, err)
	}
	if r.Digest != "" && (!strings.HasPrefix(r.Digest, "sha256:") || len(r.Digest) != 7+64) {
		return ref{}, fmt.Errorf("reference %q: bad digest", s)
	}
	return ref{repo: r.Logical(), tag: r.Tag, digest: r.Digest}, nil
}

// scopes lists the docker scopes that may apply to r, most specific first:
// the reference itself, its repository, each shorter namespace down to the
// registry, then *.domain wildcards of the registry host.
func (r ref) scopes() []string {
	var out []string
	if r.tag != "" || r.digest != "" {
		out = append(out, r.String())
	}
	for s := r.repo; ; {
		out = append(out, s)
		i := strings.LastIndex(s, "/")
		if i < 0 {
			break
		}
		s = s[:i]
	}
	host, _, _ := strings.Cut(r.repo, "/")
	if !strings.Contains(host, ":") {
		for d := host; ; {
			i := strings.Index(d, ".")
			if i < 0 {
				break
			}
			d = d[i+1:]
			out = append(out, "*."+d)
		}
	}
	return out
}

// identityRule is a parsed signedIdentity.
type identityRule struct {
	kind string // matchExact, matchRepoDigestOrExact, matchRepository, exactReference, exactRepository, remapIdentity
	ref  ref    // exactReference, exactRepository
	// remapIdentity
	prefix, signedPrefix string
}

func parseIdentity(raw json.RawMessage, where string) (identityRule, error) {
	if raw == nil {
		return identityRule{kind: "matchRepoDigestOrExact"}, nil
	}
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return identityRule{}, fmt.Errorf("%s: %w", where, err)
	}
	switch head.Type {
	case "matchExact", "matchRepoDigestOrExact", "matchRepository":
		var v struct {
			Type string `json:"type"`
		}
		if err := strict(raw, &v, where); err != nil {
			return identityRule{}, err
		}
		return identityRule{kind: head.Type}, nil
	case "exactReference":
		var v struct {
			Type            string `json:"type"`
			DockerReference string `json:"dockerReference"`
		}
		if err := strict(raw, &v, where); err != nil {
			return identityRule{}, err
		}
		r, err := parseRef(v.DockerReference)
		if err != nil {
			return identityRule{}, fmt.Errorf("%s.dockerReference: %w", where, err)
		}
		if r.tag == "" && r.digest == "" {
			return identityRule{}, fmt.Errorf("%s.dockerReference: %q has neither tag nor digest", where, v.DockerReference)
		}
		return identityRule{kind: head.Type, ref: r}, nil
	case "exactRepository":
		var v struct {
			Type             string `json:"type"`
			DockerRepository string `json:"dockerRepository"`
		}
		if err := strict(raw, &v, where); err != nil {
			return identityRule{}, err
		}
		r, err := parseRef(v.DockerRepository)
		if err != nil || r.tag != "" || r.digest != "" {
			return identityRule{}, fmt.Errorf("%s.dockerRepository: %q is not a repository name", where, v.DockerRepository)
		}
		return identityRule{kind: head.Type, ref: r}, nil
	case "remapIdentity":
		var v struct {
			Type         string `json:"type"`
			Prefix       string `json:"prefix"`
			SignedPrefix string `json:"signedPrefix"`
		}
		if err := strict(raw, &v, where); err != nil {
			return identityRule{}, err
		}
		for _, p := range []struct{ n, v string }{{"prefix", v.Prefix}, {"signedPrefix", v.SignedPrefix}} {
			if err := checkPrefix(p.v); err != nil {
				return identityRule{}, fmt.Errorf("%s.%s: %w", where, p.n, err)
			}
		}
		return identityRule{kind: head.Type, prefix: v.Prefix, signedPrefix: v.SignedPrefix}, nil
	case "":
		return identityRule{}, fmt.Errorf("%s: signedIdentity without a type", where)
	}
	return identityRule{}, fmt.Errorf("%s: unknown signedIdentity type %q", where, head.Type)
}

// checkPrefix accepts a registry host, namespace or repository (no tag or
// digest), as remapIdentity wants.
func checkPrefix(p string) error {
	if p == "" {
		return errors.New("empty")
	}
	if strings.ContainsAny(p, "@") || strings.HasSuffix(p, "/") {
		return fmt.Errorf("%q is not a registry, namespace or repository", p)
	}
	host, _, _ := strings.Cut(p, "/")
	if !strings.ContainsAny(host, ".:") && host != "localhost" {
		return fmt.Errorf("%q must start with a registry host", p)
	}
	return nil
}

// matches reports whether a signature whose payload names signed satisfies
// the rule for the image intended.
func (id identityRule) matches(intended, signed ref) bool {
	switch id.kind {
	case "matchExact":
		return exactly(intended, signed)
	case "matchRepoDigestOrExact":
		return repoDigestOrExact(intended, signed)
	case "matchRepository":
		return intended.repo == signed.repo
	case "exactReference":
		return exactly(id.ref, signed)
	case "exactRepository":
		return id.ref.repo == signed.repo
	case "remapIdentity":
		return repoDigestOrExact(id.remap(intended), signed)
	}
	return false
}

// exactly: both tagged with the same tag, or both digested with the same
// digest, in the same repository.
func exactly(a, b ref) bool {
	if a.repo != b.repo {
		return false
	}
	switch {
	case a.digest != "":
		return b.digest == a.digest && b.tag == ""
	case a.tag != "":
		return b.tag == a.tag && b.digest == ""
	}
	return false
}

// repoDigestOrExact: an image named by digest needs a signature for its
// repository (the digest is checked against the payload separately); one
// named by tag needs a signature naming that very tag.
func repoDigestOrExact(intended, signed ref) bool {
	if intended.digest != "" {
		return intended.repo == signed.repo
	}
	return exactly(intended, signed)
}

// remap rewrites intended's name when it starts with prefix (on a '/'
// boundary, or exactly), as remapIdentity does before matching.
func (id identityRule) remap(intended ref) ref {
	n := intended.repo
	if n == id.prefix || strings.HasPrefix(n, id.prefix+"/") {
		intended.repo = id.signedPrefix + n[len(id.prefix):]
	}
	return intended
}

func (id identityRule) String() string {
	switch id.kind {
	case "exactReference", "exactRepository":
		return id.kind + " " + id.ref.String()
	case "remapIdentity":
		return fmt.Sprintf("remapIdentity %s→%s", id.prefix, id.signedPrefix)
	}
	return id.kind
}
