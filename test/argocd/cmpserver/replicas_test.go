package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/status"

	"github.com/kptr-dev/kptr/test/cosigner"
	"github.com/kptr-dev/kptr/test/fnimage"
	"github.com/kptr-dev/kptr/test/registry"
)

// An HA install as an operator runs one: three repo-server replicas, each
// with its own kptr sidecar and image cache (separate pods), sharing Redis
// and the Git server, all pulling through one pull-through mirror
// (KPTR_MIRRORS) of the registry the Kptfiles name, under a signature
// policy. The upstream registry goes away mid-test. Only the mirror may ever
// reach the upstream: its access log must show no request from kptr.
func TestArgoCDReplicasBehindMirror(t *testing.T) {
	f := pushFunctions(t) // the upstream registry
	up := f.reg
	// Pushed upstream, never pulled through the mirror: once the upstream
	// is gone, neither a replica nor the mirror has it.
	late := up.Addr + "/fn/late:v1"
	unsigned := up.Addr + "/fn/unsigned:v1"
	fnimage.Push(t, f.labelsImg, late)
	fnimage.Push(t, f.annotsImg, unsigned)
	key := cosigner.NewKey(t)
	for ref, digest := range map[string]string{f.labels: digestOf(t, f.labelsImg), f.annots: digestOf(t, f.annotsImg), late: digestOf(t, f.labelsImg)} {
		repo := ref[:strings.LastIndex(ref, ":")]
		cosigner.Push(t, repo, digest, key.Sign(cosigner.Payload(repo, digest)))
	}
	pushed := len(up.Agents())
	// Debian's docker-registry refuses to start in proxy mode while its
	// upstream is unreachable: it starts first, and stays when that goes.
	mirror := registry.StartMirror(t, up)

	policy := sharedDir(t, "kptr-policy-", map[string]string{
		"cosign.pub": string(key.PublicPEM),
		"policy.json": mustJSON(t, map[string]any{
			"default": []any{map[string]string{"type": "reject"}},
			"transports": map[string]any{"docker": map[string]any{
				up.Addr + "/fn": []any{map[string]any{"type": "sigstoreSigned", "keyPath": "cosign.pub",
					"signedIdentity": map[string]string{"type": "matchRepository"}}},
			}},
		}),
	})
	env := map[string]string{
		"KPTR_ALLOWED_IMAGES":   f.allowed,
		"KPTR_MIRRORS":          up.Addr + "=" + mirror.Addr,
		"KPTR_SIGNATURE_POLICY": filepath.Join(policy, "policy.json"),
		"KPTR_TIMEOUT":          "50s", // as deploy/component sets it
	}
	work := repository(t, f)
	write(t, work, map[string]string{
		"apps/late/Kptfile":     "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: late\npipeline:\n  mutators:\n  - image: " + late + "\n    configMap:\n      tier: late\n",
		"apps/late/cm.yaml":     "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: late\n",
		"apps/unsigned/Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: unsigned\npipeline:\n  mutators:\n  - image: " + unsigned + "\n    configMap:\n      owner: nobody\n",
		"apps/unsigned/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: unsigned\n",
	})
	repoURL, rev := gitServe(t, work)
	redis := startRedis(t)
	replica := func() *chain { return startRepoServer(t, startServer(t, env), redis, repoURL, rev) }
	replicas := []*chain{replica(), replica(), replica()}
	ctx := context.Background()

	// render has replica i render app (a name new to Redis, so that the
	// repo-server runs kptr rather than answer from the shared cache).
	render := func(t *testing.T, c *chain, app, path string) error {
		t.Helper()
		calls := c.sidecar.calls("generate")
		r, err := c.generate(ctx, c.request(app, c.source(path, nil)))
		if got := c.sidecar.calls("generate"); got != calls+1 {
			t.Errorf("%s: kptr generate ran %d times, want once", app, got-calls)
		}
		if err == nil {
			assertTracked(t, app, r.Manifests, expected(nil))
		}
		return err
	}
	all := func(t *testing.T, suffix string) {
		var wg sync.WaitGroup
		for i, c := range replicas {
			wg.Go(func() {
				if err := render(t, c, fmt.Sprintf("echo-r%d-%s", i, suffix), "apps/echo"); err != nil {
					t.Errorf("replica %d: %v", i, err)
				}
			})
		}
		wg.Wait()
	}

	t.Run("three replicas pull through the mirror", func(t *testing.T) {
		all(t, "up")
		// The signature policy holds through the mirror: an unsigned image
		// is refused before it runs.
		err := render(t, replicas[0], "unsigned", "apps/unsigned")
		if msg := status.Convert(err).Message(); err == nil || !strings.Contains(msg, unsigned) || !strings.Contains(msg, "signature") {
			t.Errorf("unsigned image through the mirror: %v, want a refusal naming %s and its signature", err, unsigned)
		}
		var fromKptr int
		for _, r := range mirror.Agents() {
			if strings.HasPrefix(r[1], "kptr") {
				fromKptr++
			}
		}
		if fromKptr == 0 {
			t.Error("the mirror's log has no request from kptr: the replicas did not pull through it")
		}
	})

	checkOnlyMirror(t, up, pushed)
	// What a replica pulled the mirror keeps: wait until it has written
	// the layers, then take the upstream away.
	for _, d := range blobs(t, f.labelsImg, f.annotsImg) {
		waitFor(t, filepath.Join(mirror.Dir, "storage/docker/registry/v2/blobs/sha256", d[7:9], d[7:], "data"))
	}
	up.Stop()

	t.Run("upstream stopped: the replicas keep rendering", func(t *testing.T) {
		all(t, "down")
	})

	fresh := replica()
	t.Run("upstream stopped: a fresh replica renders through the mirror, signatures verified", func(t *testing.T) {
		if err := render(t, fresh, "echo-fresh", "apps/echo"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("upstream stopped: an image in neither fails in one line", func(t *testing.T) {
		dctx, cancel := context.WithTimeout(ctx, 60*time.Second) // the controller's deadline
		defer cancel()
		t0 := time.Now()
		_, err := fresh.generate(dctx, fresh.request("late", fresh.source("apps/late", nil)))
		took := time.Since(t0)
		if err == nil {
			t.Fatal("an image neither the replica nor the mirror holds rendered")
		}
		msg := status.Convert(err).Message()
		t.Logf("after %s the UI shows: %s", took.Round(time.Millisecond), msg)
		if strings.Contains(msg, "context deadline exceeded") || took > 50*time.Second {
			t.Errorf("failed only at the deadline (%s): %s", took, msg)
		}
		if strings.Contains(msg, "\n") {
			t.Errorf("message is not one line: %q", msg)
		}
		for _, w := range []string{late, mirror.Addr} {
			if !strings.Contains(msg, w) {
				t.Errorf("message does not name %s: %s", w, msg)
			}
		}
	})
}

// checkOnlyMirror fails the test if anything but the mirror asked the
// upstream for anything after its first skip requests (the test's pushes):
// the mirror's requests carry Go's default agent, kptr's its own.
func checkOnlyMirror(t *testing.T, up *registry.Registry, skip int) {
	t.Helper()
	reqs := up.Agents()[skip:]
	if len(reqs) == 0 {
		t.Error("the upstream served nothing: the mirror never fetched from it")
	}
	for _, r := range reqs {
		if r[1] != "Go-http-client/1.1" {
			t.Errorf("the upstream served %s to %q, not to the mirror", r[0], r[1])
		}
	}
}

// sharedDir writes files into a fresh directory the sidecar's user can read.
func sharedDir(t testing.TB, prefix string, files map[string]string) string {
	t.Helper()
	d, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	os.Chmod(d, 0o755)
	write(t, d, files)
	return d
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func waitFor(t testing.TB, path string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", path)
		}
	}
}
