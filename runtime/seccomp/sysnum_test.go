//go:build seccomp && (amd64 || arm64)

package seccomp

import (
	"testing"

	libseccomp "github.com/seccomp/libseccomp-golang"
)

// kptr's own seccomp filter (Filter: nsinit's runs and the landlock
// tier) refuses a call only if Sysnums knows its number: every call
// libcontainer's profile refuses through libseccomp must be there, with the
// number libseccomp gives it on this architecture. Names the linked
// libseccomp does not know are checked by the build (the table's
// constants come from golang.org/x/sys).
func TestOwnFilterKnowsEveryDeniedCall(t *testing.T) {
	names := append(append([]string(nil), DeniedSyscalls...), ExtraDenied...)
	names = append(names, MetadataCalls...)
	checked := 0
	for _, name := range names {
		sc, err := libseccomp.GetSyscallFromName(name)
		if err != nil || sc < 0 {
			continue // not a call here, or unknown to this libseccomp
		}
		checked++
		nr, ok := Sysnums[name]
		if !ok {
			t.Errorf("%s (%d) is refused by libcontainer's profile but missing from sysnums: kptr's filter allows it", name, sc)
		} else if int(nr) != int(sc) {
			t.Errorf("%s: sysnums has %d, libseccomp %d", name, nr, sc)
		}
	}
	if checked < 50 {
		t.Fatalf("only %d names resolved by libseccomp", checked)
	}
}
