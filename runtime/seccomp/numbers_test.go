//go:build cgo

package seccomp

import (
	"testing"

	libseccomp "github.com/seccomp/libseccomp-golang"
)

// The number tables are checked, call by call and for both architectures
// whatever this one is, against libseccomp's (the library Docker, runc and
// containerd resolve names with). Needs cgo and libseccomp-dev (the
// libseccomp-golang test dependency); the filter itself links neither.
func TestNumbersMatchLibseccomp(t *testing.T) {
	for goarch, ar := range arches() {
		arch, err := libseccomp.GetArchFromString(goarch)
		if err != nil {
			t.Fatal(err)
		}
		for name, nr := range ar.numbers {
			sc, err := libseccomp.GetSyscallFromNameByArch(name, arch)
			if err != nil || sc < 0 {
				t.Errorf("%s: %s (%d here) unknown to libseccomp", goarch, name, nr)
			} else if uint32(sc) != nr {
				t.Errorf("%s: %s: %d here, libseccomp %d", goarch, name, nr, sc)
			}
		}
		// and no name the policy uses is missing where libseccomp knows it
		for _, list := range [][]string{allowed, DeniedSyscalls, MetadataCalls, {"clone", "clone3", "socket", "personality"}} {
			for _, name := range list {
				sc, err := libseccomp.GetSyscallFromNameByArch(name, arch)
				if _, ok := ar.numbers[name]; !ok && err == nil && sc >= 0 {
					t.Errorf("%s: %s is call %d for libseccomp but has no number here: the policy would not apply to it", goarch, name, sc)
				}
			}
		}
	}
}
