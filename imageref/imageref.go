// Package imageref is the one parser of a function image reference. It
// applies kpt's naming rules (the image prefix for names without a '/', the
// ":latest" render adds), splits a reference into repository, tag and
// digest as written (a bare name has neither: go-containerregistry alone
// would invent ":latest"), spells the logical name as a containers-policy
// scope does (docker.io/library/busybox), and rewrites it to the physical
// name a mirror serves. Pipeline, cache, signature and the commands all go
// through it, so a reference means the same thing to each of them.
//
// It is a leaf: it imports no other kptr package.
package imageref

import (
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// DefaultPrefix is kpt's prefix for image names without a '/'
// (kpt main's runneroptions.GHCRImagePrefix, without a trailing '/' since
// kpt d08fb0b; ApplyPrefix adds the separator).
const DefaultPrefix = "ghcr.io/kptdev/krm-functions-catalog"

// NoPrefix, given as an image prefix, leaves names without a '/' as they
// are: kpt's explicitly empty --image-prefix. kpt trims a prefix's trailing
// '/'s, so a prefix made only of '/'s is no prefix there either.
const NoPrefix = "/"

// ApplyPrefix is kpt's RunnerOptions.ResolveToImage
// (pkg/lib/runneroptions/runneroptions.go at main): prefix loses its
// trailing '/'s; if nothing is left, image is returned as it is; otherwise
// a name without '/' becomes prefix + "/" + image, and any other is
// unchanged.
func ApplyPrefix(image, prefix string) string {
	prefix = strings.TrimRight(prefix, "/")
	if prefix == "" || strings.Contains(image, "/") {
		return image
	}
	return prefix + "/" + image
}

// Name applies kpt's naming rules: a name without '/' gets prefix (""
// means DefaultPrefix); render (latest true, not eval) appends ":latest"
// when there is neither tag nor digest.
func Name(image, prefix string, latest bool) string {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	image = ApplyPrefix(image, prefix)
	if latest && !HasTagOrDigest(image) {
		image += ":latest"
	}
	return image
}

// HasTagOrDigest reports whether image names a tag or a digest.
func HasTagOrDigest(image string) bool { return Repository(image) != image }

// Repository is image without its tag and digest, as written.
func Repository(image string) string {
	repo, _, _ := Split(image)
	return repo
}

// Split cuts image, as written, at its digest (after the first '@') and its
// tag (after the last ':' of the last path element); tag and digest are ""
// when image has none. It checks nothing: Parse does.
func Split(image string) (repo, tag, digest string) {
	repo = image
	if i := strings.Index(repo, "@"); i >= 0 {
		repo, digest = repo[:i], repo[i+1:]
	}
	slash := strings.LastIndex(repo, "/")
	if i := strings.LastIndex(repo, ":"); i > slash {
		repo, tag = repo[:i], repo[i+1:]
	}
	return repo, tag, digest
}

// Ref is a parsed image reference.
type Ref struct {
	// Named is the reference as parsed (after the prefix rule, if the
	// caller applied it).
	Named string
	// Reference is go-containerregistry's reading of Named: a bare name is
	// ":latest", a name with a tag and a digest is its digest.
	Reference name.Reference
	// Tag and Digest are as written; empty when Named has none.
	Tag, Digest string
}

// Parse parses s (surrounding space removed). opts are
// go-containerregistry's (name.Insecure).
func Parse(s string, opts ...name.Option) (Ref, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Ref{}, fmt.Errorf("empty image reference")
	}
	r, err := name.ParseReference(s, opts...)
	if err != nil {
		return Ref{}, err
	}
	out := Ref{Named: s, Reference: r}
	_, out.Tag, out.Digest = Split(s)
	if out.Digest != "" && out.Tag != "" {
		// name.ParseReference dropped the tag; check it is one
		if _, err := name.NewTag(r.Context().Name() + ":" + out.Tag); err != nil {
			return Ref{}, err
		}
	}
	return out, nil
}

// Logical is the repository's name as a containers-policy scope and a
// signature's identity spell it: the docker.io registry for a name without
// one, library/ for a docker.io name without a namespace.
func (r Ref) Logical() string { return LogicalRepository(r.Reference.Context()) }

// LogicalRepository is repo's name in containers/image's spelling.
func LogicalRepository(repo name.Repository) string {
	reg := repo.RegistryStr()
	if reg == name.DefaultRegistry || reg == "registry-1.docker.io" {
		reg = "docker.io"
	}
	return reg + "/" + repo.RepositoryStr()
}

// Mirror rewrites references whose name starts with From (a registry host or
// a registry/path prefix, matched on '/' boundaries) to start with To instead.
type Mirror struct{ From, To string }

// ParseMirror parses "SRC=DST" (gcr.io=127.0.0.1:5000, ghcr.io/kptdev=registry.corp/kptdev).
// Both sides must be a registry host with an optional path: a scheme or
// credentials (user:password@host) are refused here, before any pull, with a
// message that never repeats the credentials (registry credentials belong in
// the docker config or a credential helper).
func ParseMirror(s string) (Mirror, error) {
	from, to, ok := strings.Cut(s, "=")
	from, to = strings.Trim(strings.TrimSpace(from), "/"), strings.Trim(strings.TrimSpace(to), "/")
	shown := s
	if strings.Contains(s, "@") {
		shown = "(value with credentials, not shown)"
	} else {
		shown = fmt.Sprintf("%q", s)
	}
	if !ok || from == "" || to == "" {
		return Mirror{}, fmt.Errorf("bad mirror %s: want SRC=DST, e.g. gcr.io=127.0.0.1:5000", shown)
	}
	for _, side := range []string{from, to} {
		switch {
		case strings.Contains(side, "://"):
			return Mirror{}, fmt.Errorf("bad mirror %s: want HOST[:PORT][/PATH] on both sides, without a scheme (plain HTTP: --insecure-registry / KPTR_INSECURE_REGISTRIES)", shown)
		case strings.Contains(side, "@"):
			return Mirror{}, fmt.Errorf("bad mirror %s: credentials do not belong in a mirror; put them in the docker config (DOCKER_CONFIG) or a credential helper", shown)
		}
		if _, err := name.NewRepository(side + "/x"); err != nil {
			return Mirror{}, fmt.Errorf("bad mirror %s: %q is not a registry HOST[:PORT][/PATH]", shown, side)
		}
	}
	return Mirror{From: from, To: to}, nil
}

// Physical is the name r is fetched under: the longest matching mirror's
// To in place of its From (a docker.io name also matches as
// "docker.io/..."), with r's tag or digest; r's own name when no mirror
// matches.
func Physical(r name.Reference, mirrors []Mirror) string {
	repo := r.Context()
	names := []string{repo.Name()}
	if repo.RegistryStr() == name.DefaultRegistry {
		names = append(names, "docker.io/"+repo.RepositoryStr())
	}
	best, bestLen, rest := "", -1, ""
	for _, m := range mirrors {
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
	return s
}

// Registry is the registry host (with port) s names: what comes before its
// first '/'.
func Registry(s string) string {
	host, _, _ := strings.Cut(s, "/")
	return host
}
