// Package ci tests .ci/run, the CI entry point, without root and without
// apt: the commands it consults (id, dpkg-query, sudo, apt-get, make) are
// stubs on PATH that record how they were called.
package ci

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// stub writes an executable shell script named name into dir.
func stub(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

// runCI runs .ci/run as a non-root user (the id stub says uid 1000) with
// dpkg-query reporting every package installed but those in missing, and
// sudo working without a password when sudoOK. It returns the exit code,
// stderr and the log of the stubs' calls.
func runCI(t *testing.T, missing []string, sudoOK bool) (int, string, string) {
	t.Helper()
	bin := t.TempDir()
	log := filepath.Join(t.TempDir(), "calls")
	stub(t, bin, "id", `case "$1" in -u) echo 1000;; -un) echo builder;; *) echo "uid=1000(builder)";; esac`)
	stub(t, bin, "dpkg-query", `for p in `+strings.Join(missing, " ")+`; do [ "$p" = "$3" ] && { echo "dpkg-query: no packages found matching $3" >&2; exit 1; }; done
printf 'install ok installed'`)
	sudoExit := "1"
	if sudoOK {
		sudoExit = "0"
	}
	stub(t, bin, "sudo", `echo "sudo $*" >> `+log+`; exit `+sudoExit)
	stub(t, bin, "apt-get", `echo "apt-get $*" >> `+log)
	stub(t, bin, "make", `echo "make $*" >> `+log)
	script, err := filepath.Abs("../../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", script)
	cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin", "HOME=" + t.TempDir()}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	code := 0
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatalf(".ci/run: %v", err)
		}
		code = exit.ExitCode()
	}
	calls, err := os.ReadFile(log)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return code, stderr.String(), string(calls)
}

func TestRunNonRootNamesWhatItCannotInstall(t *testing.T) {
	code, stderr, calls := runCI(t, []string{"skopeo", "redis-server"}, false)
	if code != 3 {
		t.Errorf("exit code %d, want 3 (environment); stderr: %s", code, stderr)
	}
	for _, want := range []string{"not root", "cannot install skopeo redis-server", "apt-get install --no-install-recommends skopeo redis-server"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Contains(stderr, "umoci") {
		t.Errorf("stderr names umoci, which is installed:\n%s", stderr)
	}
	if strings.Contains(calls, "make") || strings.Contains(calls, "apt-get") {
		t.Errorf("ran %q with packages missing and no way to install them", calls)
	}
}

func TestRunNonRootInstallsWithSudo(t *testing.T) {
	code, stderr, calls := runCI(t, []string{"podman"}, true)
	if code != 0 {
		t.Fatalf("exit code %d; stderr: %s", code, stderr)
	}
	if !strings.Contains(calls, "sudo -n apt-get install") || !strings.Contains(calls, "\nmake test\n") {
		t.Errorf("calls %q: want apt-get install through sudo -n, then make test", calls)
	}
	if !strings.Contains(stderr, "installing podman with sudo") {
		t.Errorf("stderr does not say what it installs:\n%s", stderr)
	}
}

func TestRunNonRootWithEverythingInstalled(t *testing.T) {
	code, stderr, calls := runCI(t, nil, false)
	if code != 0 || calls != "make test\n" {
		t.Errorf("exit code %d, calls %q, want 0 and only make test; stderr: %s", code, calls, stderr)
	}
}
