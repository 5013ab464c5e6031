package main

import (
	"strings"
	"testing"
)

// The spellings users try first: `kptr --version`, `kptr help COMMAND`,
// `kptr COMMAND --help`.
func TestVersionFlagAndHelpCommand(t *testing.T) {
	if code, out, errs := runIn(t, "kptr", "--version"); code != 0 || !strings.HasPrefix(out, "kptr ") {
		t.Errorf("--version: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	// Help that was asked for goes to stdout (`kptr fn render --help | less`).
	code, out, errs := runIn(t, "kptr", "help", "fn", "render")
	if code != 0 || errs != "" || !strings.Contains(out, "\nUsage:\n  kptr fn render [PKG_PATH]") || !strings.Contains(out, "--allow-exec") {
		t.Errorf("help fn render: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if code, out, errs := runIn(t, "kptr", "fn", "eval", "--help"); code != 0 || errs != "" || !strings.Contains(out, "\nUsage:\n  kptr fn eval ") {
		t.Errorf("fn eval --help: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if code, out, errs := runIn(t, "kptr", "help", "fn", "rendr"); code != exitUsage || out != "" || errs != "kptr help: unknown command \"rendr\"; did you mean \"render\"?\n" {
		t.Errorf("help of an unknown command: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if code, out, errs := runIn(t, "kpt", "fn", "render", "--help"); code != 0 || errs != "" || !strings.Contains(out, "\nUsage:\n  kpt fn render [PKG_PATH] [flags]") {
		t.Errorf("kpt fn render --help: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if code, _, errs := runIn(t, "kptr", "frobnicate"); code != exitUsage || errs != "kptr: unknown command \"frobnicate\"\n" {
		t.Errorf("unknown command: exit %d, stderr %q", code, errs)
	}
}

// A negative --max-age is refused rather than silently pruning nothing.
func TestCachePruneNegativeAge(t *testing.T) {
	if code, out, errs := runIn(t, "kptr", "cache", "prune", "--max-age=-5h", "--cache-dir", t.TempDir()); code != exitUsage || out != "" || !strings.Contains(errs, "--max-age: want a positive duration, got -5h0m0s") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// --platform needs both os and architecture; "arm64" alone used to be taken
// as an OS and fail later as a registry error (exit 3).
func TestCachePullPlatformNeedsOSAndArch(t *testing.T) {
	for _, p := range []string{"arm64", "linux/"} {
		code, _, errs := runIn(t, "kptr", "cache", "pull", "--platform", p, "--offline", "--cache-dir", t.TempDir(), "gcr.io/kpt-fn/set-labels:v0.1.5")
		if code != exitUsage || !strings.Contains(errs, "--platform: want os/arch") {
			t.Errorf("%s: exit %d, stderr %q", p, code, errs)
		}
	}
}

// `kpt fn` alone shows kpt's help of the group and exits 0, as kpt does; it
// used to fail with "`kpt fn` is not supported by kptr".
func TestKptFnWithoutSubcommand(t *testing.T) {
	code, out, errs := runIn(t, "kpt", "fn")
	if code != 0 || out != "" || !strings.Contains(errs, "Usage:\n  kpt fn [flags]\n  kpt fn [command]") || !strings.Contains(errs, "render      Render a package by running its Kptfile pipelines") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// cache export's help says what -o does with an existing layout: the images
// join it (it said "a new directory").
func TestCacheExportHelpMatchesBehaviour(t *testing.T) {
	code, out, _ := runIn(t, "kptr", "cache", "export", "--help")
	if code != 0 || !strings.Contains(out, "an existing OCI layout the images are added to") || strings.Contains(out, "a new directory") {
		t.Errorf("exit %d, help %q", code, out)
	}
}
