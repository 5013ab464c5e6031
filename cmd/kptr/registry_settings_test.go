package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kptr-dev/kptr/test/hostileregistry"
)

// With no KPTR_CACHE_DIR, XDG_CACHE_HOME or HOME there is no cache
// directory: commands that need one say so (exit 3) instead of sharing
// $TMPDIR/kptr-cache with every other user (issue 9).
func TestNoSharedCacheFallback(t *testing.T) {
	for _, k := range []string{"KPTR_CACHE_DIR", "XDG_CACHE_HOME", "HOME"} {
		t.Setenv(k, "")
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	code, _, errs := runIn(t, "kptr", "cache", "ls")
	if code != exitEnv || !strings.Contains(errs, "no cache directory: KPTR_CACHE_DIR, XDG_CACHE_HOME and HOME are all unset") {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Fatalf("created %s", ents[0].Name())
	}
	// Commands that need no cache still work.
	if code, _, errs := runIn(t, "kptr", "version"); code != 0 {
		t.Fatalf("version: exit %d %s", code, errs)
	}
}

// A cache directory others can write is refused with exit 3.
func TestSharedCacheDirectoryRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	os.Mkdir(dir, 0o755)
	os.Chmod(dir, os.ModeSticky|0o777) // as /tmp
	t.Setenv("KPTR_CACHE_DIR", dir)
	code, _, errs := runIn(t, "kptr", "cache", "ls")
	if code != exitEnv || !strings.Contains(errs, dir+" is writable by group or others (mode 1777)") || strings.Count(errs, "\n") != 1 {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
}

// --registry-timeout / KPTR_REGISTRY_TIMEOUT bound how long a registry that
// never answers holds `cache pull`; a bad value is a usage error.
func TestRegistryTimeoutSetting(t *testing.T) {
	s, err := hostileregistry.Start(hostileregistry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t.Setenv("KPTR_PROGRESS", "none")
	ref := s.Blackhole + "/fn/x:v1"
	for _, tc := range []struct {
		env  string
		args []string
	}{
		{"", []string{"--registry-timeout", "1s"}},
		{"1s", nil},
	} {
		t.Setenv("KPTR_CACHE_DIR", t.TempDir())
		t.Setenv("KPTR_REGISTRY_TIMEOUT", tc.env)
		start := time.Now()
		code, _, errs := runIn(t, append(append([]string{"kptr", "cache", "pull"}, tc.args...), ref)...)
		if code != exitEnv || !strings.Contains(errs, "registry "+s.Blackhole+": no answer within 1s (--registry-timeout)") || time.Since(start) > 10*time.Second {
			t.Fatalf("exit %d after %v: %q", code, time.Since(start), errs)
		}
	}
	t.Setenv("KPTR_REGISTRY_TIMEOUT", "soon")
	if code, _, errs := runIn(t, "kptr", "cache", "pull", ref); code != exitUsage || !strings.Contains(errs, "KPTR_REGISTRY_TIMEOUT (--registry-timeout): want a duration") {
		t.Fatalf("bad KPTR_REGISTRY_TIMEOUT: exit %d %q", code, errs)
	}
}
