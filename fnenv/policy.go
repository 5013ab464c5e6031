package fnenv

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/kptr-dev/kptr/bundle"
	"github.com/kptr-dev/kptr/imageref"
	"github.com/kptr-dev/kptr/runtime"
)

// Policy is the operator's policy: what the functions of a command may
// use, whatever their Kptfiles or command lines ask for. It is enforced
// at the chain's two seams the pipeline cannot bypass: resolving (no image
// outside AllowedImages is ever resolved or pulled) and running (no exec
// function, no network, no host mounts unless allowed).
type Policy struct {
	// AllowedImages are glob patterns (CompileImagePattern); an image must
	// match one (none: no image may run).
	AllowedImages []string
	// AllowExec permits exec functions (host binaries, unsandboxed).
	AllowExec bool
	// AllowNetwork gives functions the host network.
	AllowNetwork bool
	// AllowMounts lets host mounts through (the docker face, whose own
	// policy decided them).
	AllowMounts bool
}

// PolicyError is a refusal by the operator's policy: an input error (exit
// 2), because no retry will change it.
type PolicyError struct{ msg string }

func (e *PolicyError) Error() string { return e.msg }

// ExitCode is 2: a setting to change, not a failure to retry.
func (e *PolicyError) ExitCode() int { return ExitUsage }

// CompileImagePattern turns an allow-list glob into a regexp: '*' matches
// within one path segment, '**' across segments, '?' one character;
// anything else is literal. The pattern must match the whole string.
func CompileImagePattern(pat string) (*regexp.Regexp, error) {
	if strings.TrimSpace(pat) == "" {
		return nil, errors.New("empty image pattern")
	}
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(pat); i++ {
		switch c := pat[i]; c {
		case '*':
			if i+1 < len(pat) && pat[i+1] == '*' {
				b.WriteString(".*")
				i++
			} else {
				b.WriteString("[^/]*")
			}
		case '?':
			b.WriteString("[^/]")
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString("$")
	return regexp.Compile(b.String())
}

// ImageAllowed reports whether ref matches one of patterns. A pattern
// matches the reference as written (repository plus :tag or @digest) or
// its repository alone, so "ghcr.io/org/fn" allows every tag of that one
// repository and "ghcr.io/org/fn:v1" only that tag.
func ImageAllowed(ref string, patterns []string) (bool, error) {
	if _, err := name.ParseReference(ref); err != nil {
		return false, fmt.Errorf("image %q: %v", ref, err)
	}
	repo := imageref.Repository(ref)
	for _, pat := range patterns {
		re, err := CompileImagePattern(pat)
		if err != nil {
			return false, err
		}
		if re.MatchString(ref) || re.MatchString(repo) {
			return true, nil
		}
	}
	return false, nil
}

// CheckImage refuses an image the allow-list does not name (nil p: no
// policy, every image).
func (p *Policy) CheckImage(ref string) error {
	if p == nil {
		return nil
	}
	ok, err := ImageAllowed(ref, p.AllowedImages)
	if err != nil {
		return &PolicyError{err.Error()}
	}
	if !ok {
		return &PolicyError{fmt.Sprintf("image %q is not allowed by the operator's policy (KPTR_ALLOWED_IMAGES: %s)", ref, strings.Join(p.AllowedImages, ", "))}
	}
	return nil
}

// checkRepo allows a repository whose tags are to be listed (a Kptfile
// `tag:` constraint) if some pattern, its tag part ignored, matches it.
func (p *Policy) checkRepo(repo string) error {
	if p == nil {
		return nil
	}
	pats := make([]string, len(p.AllowedImages))
	for i, pat := range p.AllowedImages {
		pats[i] = imageref.Repository(pat)
	}
	if ok, _ := ImageAllowed(repo, pats); ok {
		return nil
	}
	return &PolicyError{fmt.Sprintf("image repository %q is not allowed by the operator's policy (KPTR_ALLOWED_IMAGES: %s)", repo, strings.Join(p.AllowedImages, ", "))}
}

// checkRun refuses the runs p forbids: exec functions (a bundle without a
// rootfs runs a host binary), the host network and host mounts. Run and
// Prepare both ask, so a sandbox p forbids is never even prepared.
func (p *Policy) checkRun(b bundle.Bundle, inv runtime.Invocation) error {
	if p == nil {
		return nil
	}
	if b.Rootfs == "" && !p.AllowExec {
		return &PolicyError{fmt.Sprintf("exec function %q is not allowed by the operator's policy (KPTR_ALLOW_EXEC)", b.Ref)}
	}
	if inv.Network && !p.AllowNetwork {
		return &PolicyError{fmt.Sprintf("function %q: network access is not allowed by the operator's policy (KPTR_ALLOW_NETWORK)", b.Ref)}
	}
	if len(inv.Mounts) > 0 && !p.AllowMounts {
		return &PolicyError{fmt.Sprintf("function %q: host mounts are not allowed in generate", b.Ref)}
	}
	return nil
}
