package sigverify

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/kptr-dev/kptr/internal/sigwire"
)

// Serve answers each line in order; a request of another protocol or one
// it cannot decode is an Error answer, never a verdict; a signature that
// verifies with no key is no verdict either.
func TestServeAnswersEachLine(t *testing.T) {
	in := strings.Join([]string{
		`{"proto": "kptr-sigverify/0", "signature": {}}`,
		`{"proto": `,
		`{"proto": "` + sigwire.Proto + `", "signature": {"payload": "eA==", "sig": "eA=="}}`,
		`{"proto": "` + sigwire.Proto + `", "signature": {"bundle": "e30="}}`,
	}, "\n") + "\n"
	var out bytes.Buffer
	if err := Serve(strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	var got []sigwire.Response
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var r sigwire.Response
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("answer %q: %v", l, err)
		}
		got = append(got, r)
	}
	if len(got) != 4 {
		t.Fatalf("%d answers to 4 requests: %+v", len(got), got)
	}
	if !strings.Contains(got[0].Error, `kptr speaks "kptr-sigverify/0"`) || got[0].Rank != 0 {
		t.Errorf("another protocol: %+v", got[0])
	}
	if !strings.HasPrefix(got[1].Error, "undecodable request") {
		t.Errorf("undecodable: %+v", got[1])
	}
	if got[2].Rank != sigwire.RankWrongKey || got[2].Error != "" {
		t.Errorf("a classic signature and no key: %+v", got[2])
	}
	if got[3].Rank != sigwire.RankMalformed || !strings.Contains(got[3].Why, "malformed sigstore bundle") {
		t.Errorf("an empty bundle: %+v", got[3])
	}
}

// A request cut short or longer than sigwire.MaxLine ends Serve with an
// error (kptr then reports the verifier's end), bounded.
func TestServeRefusesBrokenInput(t *testing.T) {
	if err := Serve(strings.NewReader(`{"proto": "x"`), &bytes.Buffer{}); err == nil {
		t.Error("a request without its newline was served")
	}
	long := strings.Repeat("x", sigwire.MaxLine+1)
	if err := Serve(strings.NewReader(long), &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Errorf("an endless request: %v", err)
	}
}
