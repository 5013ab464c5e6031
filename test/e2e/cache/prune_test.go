package cache_test

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/kptr-dev/kptr/test/fnimage"
	"github.com/kptr-dev/kptr/test/registry"
)

// prune never removes an image another running process is using; once that
// process exits, it does.
func TestPruneSparesImagesHeldByRunningProcesses(t *testing.T) {
	reg := registry.Start(t)
	held, idle := reg.Addr+"/fn/held:v1", reg.Addr+"/fn/idle:v1"
	fnimage.Push(t, fnimage.Build(t, "cat"), held)
	fnimage.Push(t, fnimage.Build(t, "cat", fnimage.WithLayers(fnimage.Layer(t, map[string]string{"idle": "x"}))), idle)
	dir := t.TempDir()
	kptr(t, dir, "cache", "pull", held, idle).must(t)

	holder := exec.Command(os.Args[0])
	holder.Env = []string{"KPTR_E2E_HOLD=" + held, "KPTR_CACHE_DIR=" + dir, "HOME=" + dir}
	stdin, _ := holder.StdinPipe()
	stdout, _ := holder.StdoutPipe()
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer holder.Process.Kill()
	rootfs, _ := bufio.NewReader(stdout).ReadString('\n')
	rootfs = strings.TrimSpace(rootfs)
	if !strings.HasPrefix(rootfs, dir) {
		t.Fatalf("holder: %q", rootfs)
	}

	p := kptr(t, dir, "cache", "prune", "--all").must(t)
	if !strings.Contains(p.stdout, "kept") || !strings.Contains(p.stdout, "fn/held:v1: in use") || !strings.Contains(p.stdout, "removed") {
		t.Fatalf("prune with a holder: %s", p.stdout)
	}
	if _, err := os.Stat(rootfs + "/usr/local/bin/function"); err != nil {
		t.Fatalf("held rootfs damaged: %v", err)
	}
	ls := kptr(t, dir, "cache", "ls").must(t).stdout
	if !strings.Contains(ls, "in use") || strings.Contains(ls, "fn/idle") {
		t.Fatalf("ls after prune: %s", ls)
	}
	kptr(t, dir, "cache", "verify").must(t)

	stdin.Close()
	holder.Wait()
	p = kptr(t, dir, "cache", "prune", "--all").must(t)
	if !strings.Contains(p.stdout, "fn/held:v1") || strings.Contains(p.stdout, "kept") {
		t.Fatalf("prune after the holder exited: %s", p.stdout)
	}
	if _, err := os.Stat(rootfs); !os.IsNotExist(err) {
		t.Fatalf("rootfs still there: %v", err)
	}
}
