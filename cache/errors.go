package cache

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// Error is what every exported cache operation returns on failure: one line
// that names the image and the cause. ExitCode maps it onto kptr's exit codes:
// 2 for a reference that does not parse, 3 (environment) for everything else
// (registry, network, disk, corrupt or hostile content).
type Error struct {
	// Image is the reference as the caller gave it (after the prefix rule).
	Image string
	// Err is the cause.
	Err error
	// code is the exit code; 0 means 3.
	code int
}

func (e *Error) Error() string {
	msg := oneLine(Describe(e.Err))
	if e.Image == "" {
		return msg
	}
	return e.Image + ": " + msg
}

func (e *Error) Unwrap() error { return e.Err }

// ExitCode is 2 for an unparsable reference and 3 for registry and cache trouble.
func (e *Error) ExitCode() int {
	if e.code != 0 {
		return e.code
	}
	return 3
}

// ErrNotCached is the cause when an image is needed but the pull policy or
// --offline forbids fetching it.
var ErrNotCached = errors.New("not in the cache")

// ErrHostile is the cause (wrapped) when a layer tries to escape its root,
// exceed a limit or otherwise breaks the extraction rules.
var ErrHostile = errors.New("unsafe layer")

func imgErr(image string, err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	return &Error{Image: image, Err: err}
}

func usageErr(image string, err error) error {
	return &Error{Image: image, Err: err, code: 2}
}

// oneLine folds multi-line causes (registry error bodies) into one line.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	f := strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' })
	for i := range f {
		f[i] = strings.TrimSpace(f[i])
	}
	return strings.Join(f, "; ")
}

// Describe is err's message with a registry's error answers in words: the
// request, each error code and message, and a detail map as key=value
// (go-containerregistry prints the detail as a Go map: "map[Tag:v9.9.9]").
func Describe(err error) string {
	msg := err.Error()
	var te *transport.Error
	if !errors.As(err, &te) {
		return msg
	}
	return strings.Replace(msg, te.Error(), registryWords(te), 1)
}

func registryWords(te *transport.Error) string {
	var b strings.Builder
	if r := te.Request; r != nil && r.URL != nil {
		fmt.Fprintf(&b, "%s %s://%s%s: ", r.Method, r.URL.Scheme, r.URL.Host, r.URL.Path)
	}
	if len(te.Errors) == 0 {
		fmt.Fprintf(&b, "the registry answered %d %s", te.StatusCode, http.StatusText(te.StatusCode))
		return b.String()
	}
	for i, d := range te.Errors {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s: %s", d.Code, d.Message)
		if w := detailWords(d.Detail); w != "" {
			b.WriteString(" (" + w + ")")
		}
	}
	if te.StatusCode == http.StatusNotFound || slices.ContainsFunc(te.Errors, func(d transport.Diagnostic) bool {
		return d.Code == transport.ManifestUnknownErrorCode || d.Code == transport.NameUnknownErrorCode
	}) {
		b.WriteString(": the registry has no such image, tag or digest")
	}
	return b.String()
}

// detailWords renders a registry's error detail (any JSON) as key=value
// pairs in key order, or as plain text.
func detailWords(d any) string {
	switch v := d.(type) {
	case nil:
		return ""
	case string:
		return v
	case map[string]any:
		keys := slices.Sorted(maps.Keys(v))
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			parts = append(parts, k+"="+detailWords(v[k]))
		}
		return strings.Join(parts, ", ")
	case []any:
		parts := make([]string, 0, len(v))
		for _, e := range v {
			parts = append(parts, detailWords(e))
		}
		return strings.Join(parts, ", ")
	}
	b, err := json.Marshal(d)
	if err != nil {
		return ""
	}
	return string(b)
}
