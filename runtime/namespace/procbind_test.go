package namespace

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// In a container whose /proc is masked (paths over-mounted, as every
// container runtime does), the kernel refuses a fresh procfs in a new user
// namespace. The sandbox then binds the existing /proc: the masks still
// apply and the function is still pid 1 of its own namespace, but the outer
// process list is visible (kptr doctor says so), so kptr must keep its own
// environment and memory unreadable. The test builds that situation in a user
// and mount namespace of its own and runs the /proc, pid and environment
// tests inside it.
func TestProcBindFallback(t *testing.T) {
	if os.Getenv("KPTR_MASKED_PROC_CHILD") == "1" {
		if sandbox(t).Features().FreshProc {
			t.Fatal("a fresh procfs was mounted although /proc is masked: the fallback is not exercised")
		}
		return
	}
	self := os.Args[0] // TestMain re-executed us from a memfd: os.Executable names that
	cmd := exec.Command("unshare", "--user", "--map-root-user", "--mount", "/bin/sh", "-c",
		`for p in /proc/keys /proc/timer_list /proc/kcore /proc/interrupts; do [ -e $p ] && mount --bind /dev/null $p && m=1 && break; done; [ -n "$m" ] && exec "$0" -test.v -test.count=1 -test.run '^(TestProcBindFallback|TestMaskedProc|TestPidNamespace|TestSmokeCat|TestEnvironmentOnlyImageAndInvocation)$'`, self)
	cmd.Env = append(os.Environ(), "KPTR_MASKED_PROC_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	for _, name := range []string{"TestProcBindFallback", "TestMaskedProc", "TestPidNamespace", "TestEnvironmentOnlyImageAndInvocation"} {
		if !strings.Contains(string(out), "--- PASS: "+name) {
			t.Errorf("%s did not pass with a masked /proc:\n%s", name, out)
		}
	}
}
