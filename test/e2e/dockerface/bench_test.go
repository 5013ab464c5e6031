package dockerface

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkTrivialFunction is one run of the trivial `cat` fixture (its
// image, a warm cache, kptr's default sandbox) as each caller makes it:
//
//   - fn-eval: kptr fn eval - --image IMAGE (a ResourceList on stdin);
//
//   - docker-run: kptr as docker, kustomize v5.8's exact command line;
//
//   - kustomize-exec / kustomize-container: kustomize build
//     --enable-alpha-plugins of a one-ConfigMap kustomization whose
//     transformer is the fixture binary (--enable-exec) or its image through
//     kptr as docker;
//
//   - podman-run: podman run of the same image with the same line, where
//     podman works (skipped with its error otherwise).
//
//     go test ./test/e2e/dockerface -run '^$' -bench Trivial -benchtime 30x -count 3
func BenchmarkTrivialFunction(b *testing.B) {
	s := newSession(b)
	img := s.images["cat"]
	input := "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: x\n"
	for _, container := range []bool{true, false} {
		dir := filepath.Join(s.base, map[bool]string{true: "k-container", false: "k-exec"}[container])
		writeTree(b, dir, map[string]string{
			"kustomization.yaml": "resources:\n- cm.yaml\ntransformers:\n- fn.yaml\n",
			"cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
			"fn.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fn\n  annotations:\n    config.kubernetes.io/function: |\n" + s.function("cat", container, "") + "data: {}\n",
		})
	}
	kustomizeLine := []string{"run", "--rm", "-i", "-a", "STDIN", "-a", "STDOUT", "-a", "STDERR", "--network", "none", "--user", "nobody",
		"--security-opt=no-new-privileges", "-e", "LOG_TO_STDERR=true", "-e", "STRUCTURED_RESULTS=true"}
	ways := []struct {
		name string
		argv []string
	}{
		{"fn-eval", []string{filepath.Join(s.bin, "kptr"), "fn", "eval", "-", "--image", img}},
		{"docker-run", append(append([]string{filepath.Join(s.bin, "docker")}, kustomizeLine...), img)},
		{"kustomize-exec", []string{filepath.Join(s.bin, "kustomize"), "build", "--enable-alpha-plugins", "--enable-exec", filepath.Join(s.base, "k-exec")}},
		{"kustomize-container", []string{filepath.Join(s.bin, "kustomize"), "build", "--enable-alpha-plugins", filepath.Join(s.base, "k-container")}},
		{"podman-run", append(append([]string{"podman"}, kustomizeLine...), "--pull", "never", img)},
	}
	// podman as test/e2e/argocd/podman_test.go runs it here: runc, cgroupfs,
	// ulimits within this machine's (raising them needs CAP_SYS_RESOURCE)
	var nofile, nproc unix.Rlimit
	unix.Getrlimit(unix.RLIMIT_NOFILE, &nofile)
	unix.Getrlimit(unix.RLIMIT_NPROC, &nproc)
	nofile.Cur, nproc.Cur = min(nofile.Cur, nofile.Max, 4096), min(nproc.Cur, nproc.Max, 4096)
	conf := filepath.Join(s.base, "containers.conf")
	writeTree(b, s.base, map[string]string{"containers.conf": fmt.Sprintf("[containers]\ndefault_ulimits = [\"nofile=%d:%d\", \"nproc=%d:%d\"]\n"+
		"[engine]\nruntime = \"runc\"\ncgroup_manager = \"cgroupfs\"\nevents_logger = \"file\"\n", nofile.Cur, nofile.Cur, nproc.Cur, nproc.Cur)})
	env := append([]string{"HOME=" + filepath.Join(s.base, "home-root"), "TMPDIR=/tmp", "CONTAINERS_CONF=" + conf}, s.env...)
	once := func(argv []string) (string, error) {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir = s.base
		cmd.Env = env
		cmd.Stdin = strings.NewReader(input)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	pull := exec.Command("podman", "pull", "--tls-verify=false", img)
	pull.Env = env
	if out, err := pull.CombinedOutput(); err != nil {
		b.Logf("podman pull: %v %s", err, out)
	}
	for _, w := range ways {
		b.Run(w.name, func(b *testing.B) {
			if out, err := once(w.argv); err != nil { // warms the cache, checks the way works
				if w.name == "podman-run" {
					b.Skipf("podman does not run here: %v %s", err, out)
				}
				b.Fatalf("%v: %v\n%s", w.argv, err, out)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if out, err := once(w.argv); err != nil {
					b.Fatalf("%v: %v\n%s", w.argv, err, out)
				}
			}
		})
	}
}
