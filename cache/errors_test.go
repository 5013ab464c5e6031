package cache

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// A registry's error answer is printed in words: Docker Hub and the
// distribution registry send a detail object with MANIFEST_UNKNOWN, which
// go-containerregistry prints as a Go map ("map[Tag:v9.9.9]").
func TestErrorDescribesRegistryAnswers(t *testing.T) {
	u, _ := url.Parse("https://registry.example/v2/fn/x/manifests/v9.9.9?ns=a")
	for _, tc := range []struct {
		te   *transport.Error
		want string
	}{
		{&transport.Error{StatusCode: 404, Request: &http.Request{Method: "GET", URL: u},
			Errors: []transport.Diagnostic{{Code: transport.ManifestUnknownErrorCode, Message: "manifest unknown", Detail: map[string]any{"Tag": "v9.9.9"}}}},
			"fn/x:v9.9.9: fetching manifest: GET https://registry.example/v2/fn/x/manifests/v9.9.9: MANIFEST_UNKNOWN: manifest unknown (Tag=v9.9.9): the registry has no such image, tag or digest"},
		{&transport.Error{StatusCode: 503},
			"fn/x:v9.9.9: fetching manifest: the registry answered 503 Service Unavailable"},
		{&transport.Error{StatusCode: 401, Errors: []transport.Diagnostic{
			{Code: transport.UnauthorizedErrorCode, Message: "authentication required", Detail: []any{map[string]any{"Type": "repository", "Name": "fn/x", "Action": "pull"}}},
			{Code: transport.DeniedErrorCode, Message: "denied", Detail: 42.0}}},
			"fn/x:v9.9.9: fetching manifest: UNAUTHORIZED: authentication required (Action=pull, Name=fn/x, Type=repository); DENIED: denied (42)"},
	} {
		got := (&Error{Image: "fn/x:v9.9.9", Err: fmt.Errorf("fetching manifest: %w", tc.te)}).Error()
		if got != tc.want || strings.Contains(got, "map[") {
			t.Errorf("got  %q\nwant %q", got, tc.want)
		}
	}
}
