package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The commands reach the sandbox tiers only through the registry (the
// blank import of runtime/tiers, then fnenv and runtime.Open): a command
// that imported a tier would decide where a function runs beside fnenv.
func TestCommandsReachTiersThroughTheRegistry(t *testing.T) {
	out := goList(t, "-f", `{{join .Imports "\n"}}`, ".")
	const rt = "github.com/kptr-dev/kptr/runtime/"
	for _, imp := range strings.Fields(out) {
		if strings.HasPrefix(imp, rt) && imp != rt+"tiers" {
			t.Errorf("cmd/kptr imports %s: a tier is reached through fnenv and the registry (runtime/tiers)", imp)
		}
	}
}

// goList is `go list args` of this package (skips without a toolchain).
func goList(t *testing.T, args ...string) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go toolchain:", err)
	}
	out, err := exec.Command(gobin, append([]string{"list"}, args...)...).Output()
	if err != nil {
		t.Skip("go list:", err)
	}
	return string(out)
}
