package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kptr-dev/kptr/cmd/kptr/internal/dockerface/dockerfacetest"
	"github.com/kptr-dev/kptr/internal/sigverifytest"
	"github.com/kptr-dev/kptr/test/fnimage"
	"github.com/kptr-dev/kptr/test/registry"
)

type dockerFixture struct {
	hostile, labels string
	env             map[string]string
}

func newDockerFixture(t *testing.T) dockerFixture {
	t.Helper()
	reg := registry.Start(t)
	f := dockerFixture{hostile: reg.Addr + "/fn/hostile:v1", labels: reg.Addr + "/fn/set-labels:v1"}
	fnimage.Push(t, fnimage.Build(t, "hostile", fnimage.WithMountPoints()), f.hostile)
	fnimage.Push(t, fnimage.Build(t, "set-labels"), f.labels)
	fnimage.Push(t, fnimage.Build(t, "hostile", fnimage.WithEntrypoint("/usr/local/bin/nowhere")), reg.Addr+"/fn/noentry:v1")
	fnimage.Push(t, fnimage.Build(t, "hostile", fnimage.WithEntrypoint("/etc/passwd")), reg.Addr+"/fn/noexec:v1")
	f.env = map[string]string{
		"KPTR_CACHE_DIR": t.TempDir(), "HOME": t.TempDir(),
		// stands for Argo CD's Redis password in the repo-server's environment
		"REDIS_PASSWORD": "argocd-redis-secret",
		"LOG_TO_STDERR":  "true",
	}
	return f
}

// docker runs one docker command line through the face with env (f.env
// and more) and stdin, and returns stdout, stderr and the exit code.
func (f dockerFixture) docker(t *testing.T, more map[string]string, stdin string, args ...string) (string, string, int) {
	t.Helper()
	env := map[string]string{}
	for k, v := range f.env {
		env[k] = v
	}
	for k, v := range more {
		env[k] = v
	}
	var out, errb bytes.Buffer
	g := newGlobals(strings.NewReader(stdin), &out, &errb, envMap(env))
	defer g.cleanup()
	code := g.docker(context.Background(), args)
	return out.String(), errb.String(), code
}

const labelsInput = `apiVersion: config.kubernetes.io/v1
kind: ResourceList
functionConfig:
  apiVersion: v1
  kind: ConfigMap
  metadata:
    name: cfg
  data:
    tier: web
items:
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: x
`

// kustomize's exact command line runs the function: its output, nothing
// else on stderr, exit 0; the function's exit code is the command's.
func TestDockerRunAsKustomize(t *testing.T) {
	f := newDockerFixture(t)
	out, errs, code := f.docker(t, nil, labelsInput, dockerfacetest.Args("kustomize-v5.8-run.args", f.labels)...)
	if code != 0 || errs != "" || !strings.Contains(out, "tier: web") || !strings.Contains(out, "kind: ResourceList") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	// kpt's command line too, with its pull policy
	args := []string{"run", "--rm", "-i", "--network", "none", "--user", "nobody", "--security-opt=no-new-privileges", "--pull", "never", f.labels}
	if out, errs, code = f.docker(t, nil, labelsInput, args...); code != 0 || errs != "" || !strings.Contains(out, "tier: web") {
		t.Fatalf("kpt's line, --pull never after a pull: exit %d\n%s\n%s", code, out, errs)
	}
	out, errs, code = f.docker(t, nil, "", "run", "--rm", "-i", "--network", "none", f.hostile, "exit", "3")
	if code != 3 || out != "" || errs != "failing on purpose with 3\n" {
		t.Fatalf("exit code: %d, stdout %q, stderr %q; want 3 and the function's own stderr", code, out, errs)
	}
}

// Of the -e NAME form only the names the operator's policy lists reach the
// function; -e NAME=VALUE always does.
func TestDockerRunEnvironment(t *testing.T) {
	f := newDockerFixture(t)
	args := dockerfacetest.Args("kyaml-old-run.args", f.hostile, "-e", "GIVEN=1")
	// kyaml-old-run.args mounts /src/data: this test is about the environment
	var noMounts []string
	for i := 0; i < len(args); i++ {
		if args[i] == "--mount" {
			i++
			continue
		}
		noMounts = append(noMounts, args[i])
	}
	noMounts = append(noMounts, "env")
	out, errs, code := f.docker(t, nil, "", noMounts...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if strings.Contains(out, "argocd-redis-secret") || strings.Contains(out, "REDIS_PASSWORD") {
		t.Errorf("the function saw the caller's REDIS_PASSWORD, which no policy names:\n%s", out)
	}
	if !strings.Contains(out, "LOG_TO_STDERR=true\n") || !strings.Contains(out, "GIVEN=1\n") {
		t.Errorf("want LOG_TO_STDERR (default policy) and GIVEN=1 (a value given):\n%s", out)
	}
	out, _, code = f.docker(t, map[string]string{"KPTR_DOCKER_ENV": "REDIS_PASSWORD"}, "", noMounts...)
	if code != 0 || !strings.Contains(out, "REDIS_PASSWORD=argocd-redis-secret\n") || strings.Contains(out, "LOG_TO_STDERR") {
		t.Errorf("KPTR_DOCKER_ENV=REDIS_PASSWORD: want that one variable and no other:\n%s", out)
	}
}

// Every refusal is one line on stderr and exit 125, before anything runs.
func TestDockerRefusals(t *testing.T) {
	f := newDockerFixture(t)
	outside := t.TempDir()
	inside := t.TempDir()
	cases := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"unsupported flag", nil, dockerfacetest.Args("kustomize-v5.8-run.args", f.hostile, "--privileged"), "the flag --privileged of `run` is not supported"},
		{"unsupported subcommand", nil, []string{"build", "."}, "`build` is not supported"},
		{"network host without the operator's setting", nil, dockerfacetest.Args("kpt-beta56-network.args", f.hostile), "run --network host: the operator's policy gives functions no network (set KPTR_ALLOW_NETWORK=true"},
		{"bind mount outside the allowed directories", map[string]string{"KPTR_DOCKER_BIND_DIRS": inside},
			dockerfacetest.Args("kustomize-v5.8-run.args", f.hostile, "--mount", "type=bind,source="+outside+",target=/data,readonly"),
			"run --mount source " + outside + ": not beneath a directory the operator allows bind mounts from (KPTR_DOCKER_BIND_DIRS: " + inside + ")"},
		{"bind mount through a symlink", map[string]string{"KPTR_DOCKER_BIND_DIRS": inside},
			dockerfacetest.Args("kustomize-v5.8-run.args", f.hostile, "--mount", "type=bind,source="+filepath.Join(inside, "link")+",target=/data"),
			"not beneath a directory the operator allows bind mounts from"},
		{"image outside the allow-list", map[string]string{"KPTR_ALLOWED_IMAGES": "ghcr.io/kptdev/krm-functions-catalog/*"},
			dockerfacetest.Args("kustomize-v5.8-run.args", f.hostile), "is not allowed by the operator's policy (KPTR_ALLOWED_IMAGES"},
		{"bad setting", map[string]string{"KPTR_FN_TIMEOUT": "soon"}, dockerfacetest.Args("kustomize-v5.8-run.args", f.hostile), "KPTR_FN_TIMEOUT (--fn-timeout): want a duration"},
	}
	if err := os.Symlink(outside, filepath.Join(inside, "link")); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		out, errs, code := f.docker(t, c.env, "", c.args...)
		if code != 125 || out != "" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, c.want) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want 125 and one line with %q", c.name, code, out, errs, c.want)
		}
	}
	// allowed, the same lines run
	if _, errs, code := f.docker(t, map[string]string{"KPTR_ALLOW_NETWORK": "true"}, "", dockerfacetest.Args("kpt-beta56-network.args", f.hostile)...); code != 0 {
		t.Errorf("network host with KPTR_ALLOW_NETWORK: exit %d: %s", code, errs)
	}
}

// A bind mount beneath an allowed directory is seen read-only, unless rw;
// a tmpfs is a writable scratch directory. (The namespace tier: the landlock
// tier has no mount namespace and refuses mounts, exit 125. Targets are
// directories of the image: without an overlay the sandbox cannot create
// one in the image.)
func TestDockerMounts(t *testing.T) {
	f := newDockerFixture(t)
	data := t.TempDir()
	if err := os.WriteFile(filepath.Join(data, "f"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(data, 0o755); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"KPTR_DOCKER_BIND_DIRS": data, "KPTR_SANDBOX": "namespace"}
	out, errs, code := f.docker(t, env, "", "run", "--rm", "--network", "none",
		"--mount", "type=bind,source="+data+",target=/var,readonly",
		"--mount", "type=tmpfs,target=/tmp",
		f.hostile, "read", "/var/f")
	if code != 0 || !strings.Contains(out, "/var/f: readable 5 bytes") {
		t.Fatalf("read: exit %d\n%s\n%s", code, out, errs)
	}
	out, _, _ = f.docker(t, env, "", "run", "--rm", "--mount", "type=bind,source="+data+",target=/var", "--mount", "type=tmpfs,target=/tmp",
		f.hostile, "write", "/var/g", "/tmp/g")
	if !strings.Contains(out, "/var/g: open /var/g: read-only file system") || !strings.Contains(out, "/tmp/g: written") {
		t.Errorf("want the bind read-only (no rw=true) and the tmpfs writable:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(data, "g")); err == nil {
		t.Errorf("the function wrote into a read-only bind mount")
	}
}

// docker's other codes: 127 an entrypoint not in the image, 126 one that is
// not executable; and --user is the function's user.
func TestDockerEntrypointAndUser(t *testing.T) {
	f := newDockerFixture(t)
	reg := strings.Split(f.hostile, "/")[0]
	if _, errs, code := f.docker(t, nil, "", "run", "--rm", reg+"/fn/noentry:v1"); code != 127 || !strings.Contains(errs, "entrypoint /usr/local/bin/nowhere not found") {
		t.Errorf("no entrypoint: exit %d %q, want 127", code, errs)
	}
	if _, errs, code := f.docker(t, nil, "", "run", "--rm", reg+"/fn/noexec:v1"); code != 126 || !strings.Contains(errs, "not an executable file") {
		t.Errorf("not executable: exit %d %q, want 126", code, errs)
	}
	if os.Geteuid() != 0 {
		return // rootless, only the invoking uid is mapped: every user runs as it
	}
	out, errs, code := f.docker(t, map[string]string{"KPTR_SANDBOX": "namespace"}, "", "run", "--rm", "--user", "1234:2345", f.hostile, "id")
	if code != 0 || !strings.Contains(out, "uid: 1234\n") || !strings.Contains(out, "gid: 2345\n") {
		t.Errorf("--user 1234:2345: exit %d\n%s\n%s", code, out, errs)
	}
}

// tag, inspect, rmi, images and pull work on kptr's cache: a local tag is a
// cache entry under that name, and run --pull missing (or never) of it runs
// the image it was made from.
func TestDockerImageCommands(t *testing.T) {
	f := newDockerFixture(t)
	if out, errs, code := f.docker(t, nil, "", "pull", f.hostile); code != 0 || out != f.hostile+"\n" {
		t.Fatalf("pull: exit %d %q %q", code, out, errs)
	}
	if _, errs, code := f.docker(t, nil, "", "tag", f.hostile, "local/alias:v1"); code != 0 {
		t.Fatalf("tag: exit %d %s", code, errs)
	}
	out, errs, code := f.docker(t, nil, "", "image", "inspect", "local/alias:v1")
	var imgs []dockerImage
	if code != 0 || json.Unmarshal([]byte(out), &imgs) != nil || len(imgs) != 1 || !strings.HasPrefix(imgs[0].Id, "sha256:") {
		t.Fatalf("inspect: exit %d\n%s\n%s", code, out, errs)
	}
	if out, errs, _ := f.docker(t, nil, "", "inspect", "--format", "{{.Id}}", f.hostile); out != imgs[0].Id+"\n" {
		t.Log(errs)
		t.Errorf("the tag names another image: %q, want %q", out, imgs[0].Id)
	}
	if out, errs, code := f.docker(t, nil, "", "run", "--rm", "--pull", "missing", "local/alias:v1", "exit", "0"); code != 0 {
		t.Errorf("run of the local tag: exit %d %s %s", code, out, errs)
	}
	if out, _, code := f.docker(t, nil, "", "images"); code != 0 || !strings.Contains(out, "index.docker.io/local/alias") && !strings.Contains(out, "local/alias") {
		t.Errorf("images: %d\n%s", code, out)
	}
	if out, errs, code := f.docker(t, nil, "", "rmi", "local/alias:v1"); code != 0 || out != "Untagged: local/alias:v1\n" {
		t.Errorf("rmi: exit %d %q %q", code, out, errs)
	}
	if _, errs, code := f.docker(t, nil, "", "image", "inspect", "local/alias:v1"); code != 1 || errs != "Error: No such image: local/alias:v1\n" {
		t.Errorf("inspect after rmi: exit %d %q", code, errs)
	}
	if _, errs, code := f.docker(t, nil, "", "run", "--rm", "--pull", "never", "local/alias:v1"); code != 125 || strings.Count(errs, "\n") != 1 {
		t.Errorf("run --pull never after rmi: exit %d %q, want 125 and one line", code, errs)
	}
	if out, _, code := f.docker(t, nil, "", "version", "--format", "{{.Client.Version}}"); code != 0 || out != dockerCompatVersion+"\n" {
		t.Errorf("version: %d %q", code, out)
	}
}

// Invoked as docker, podman or nerdctl, kptr is the face; as kptr, the face
// is kptr docker.
func TestDockerDispatch(t *testing.T) {
	for _, argv0 := range []string{"/usr/local/bin/docker", "podman", "/opt/nerdctl", "kptr"} {
		args := []string{argv0, "version", "--format", "{{.Client.Version}}"}
		if argv0 == "kptr" {
			args = []string{argv0, "docker", "version", "--format", "{{.Client.Version}}"}
		}
		var out, errb bytes.Buffer
		if code := run(args, strings.NewReader(""), &out, &errb); code != 0 || out.String() != dockerCompatVersion+"\n" {
			t.Errorf("%q: exit %d %q %q", args, code, out.String(), errb.String())
		}
		var e2 bytes.Buffer
		bad := append(args[:len(args)-3], "frobnicate")
		if code := run(bad, strings.NewReader(""), &out, &e2); code != 125 || !strings.Contains(e2.String(), "`frobnicate` is not supported by kptr's docker face") {
			t.Errorf("%q: exit %d %q, want 125", bad, code, e2.String())
		}
	}
}

// kptr install-docker DIR copies kptr there, with its signature verifier
// beside it and docker a link to it, and refuses to replace a docker that
// is not that link.
func TestInstallDocker(t *testing.T) {
	if err := sigverifytest.BesideExecutable(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var out, errb bytes.Buffer
	if code := run([]string{"kptr", "install-docker", dir}, strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	self, _ := os.Executable()
	want, _ := os.ReadFile(self)
	got, err := os.ReadFile(filepath.Join(dir, "kptr"))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("DIR/kptr is not this binary (%v)", err)
	}
	verifier, _ := os.ReadFile(filepath.Join(filepath.Dir(self), "kptr-sigverify"))
	if got, err := os.ReadFile(filepath.Join(dir, "kptr-sigverify")); err != nil || len(verifier) == 0 || !bytes.Equal(got, verifier) {
		t.Fatalf("DIR/kptr-sigverify is not the verifier beside this binary (%v)", err)
	}
	if l, err := os.Readlink(filepath.Join(dir, "docker")); err != nil || l != "kptr" {
		t.Fatalf("DIR/docker: %q %v", l, err)
	}
	if code := run([]string{"kptr", "install-docker", dir}, strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("again: exit %d: %s", code, errb.String())
	}
	other := t.TempDir()
	os.WriteFile(filepath.Join(other, "docker"), []byte("#!/bin/sh\n"), 0o755)
	errb.Reset()
	if code := run([]string{"kptr", "install-docker", other}, strings.NewReader(""), &out, &errb); code != 2 || !strings.Contains(errb.String(), "exists and is not a link to kptr") {
		t.Fatalf("over another docker: exit %d %s", code, errb.String())
	}
}
