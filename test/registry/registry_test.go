package registry

import (
	"io"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// A mirror pulls from its upstream what it lacks, keeps it, and serves it
// by tag once the upstream is stopped; the upstream's log shows the mirror
// as the only client of the pull.
func TestMirrorServesWithUpstreamStopped(t *testing.T) {
	up := Start(t)
	img, err := random.Image(1024, 2)
	if err != nil {
		t.Fatal(err)
	}
	push, err := name.ParseReference(up.Addr + "/fn/x:v1")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(push, img); err != nil {
		t.Fatal(err)
	}
	mirror := StartMirror(t, up)
	before := len(up.Requests())
	pull := func() error {
		ref, err := name.ParseReference(mirror.Addr + "/fn/x:v1")
		if err != nil {
			return err
		}
		got, err := remote.Image(ref, remote.WithUserAgent("kptr-test-client"))
		if err != nil {
			return err
		}
		_, err = got.RawConfigFile()
		if err == nil {
			ls, _ := got.Layers()
			for _, l := range ls {
				rc, err := l.Compressed()
				if err != nil {
					return err
				}
				_, err = io.Copy(io.Discard, rc)
				rc.Close()
				if err != nil {
					return err
				}
			}
		}
		return err
	}
	if err := pull(); err != nil {
		t.Fatalf("pull through the mirror: %v", err)
	}
	reqs := up.Agents()[before:]
	if len(reqs) == 0 {
		t.Fatal("the upstream served nothing for a pull through the mirror")
	}
	for _, r := range reqs {
		if strings.Contains(r[1], "kptr-test-client") {
			t.Errorf("the client reached the upstream: %s (agent %q)", r[0], r[1])
		}
	}
	t.Logf("the mirror's agent at the upstream: %q", reqs[0][1])
	up.Stop()
	if err := pull(); err != nil {
		t.Fatalf("pull through the mirror with the upstream stopped: %v", err)
	}
	found := false
	for _, r := range mirror.Agents() {
		found = found || strings.Contains(r[1], "kptr-test-client")
	}
	if !found {
		t.Error("the mirror's log has no request from the client")
	}
}
