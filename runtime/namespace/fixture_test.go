package namespace

import (
	"testing"

	"github.com/kptr-dev/kptr/bundle"
	"github.com/kptr-dev/kptr/runtime/internal/runtimetest"
)

// The shared test image and checks (runtime/internal/runtimetest), below
// this test binary's testTmp.

const imagePath = runtimetest.ImagePath

type blockingReader = runtimetest.BlockingReader

var (
	facts         = runtimetest.Facts
	must          = runtimetest.Must
	copyFile      = runtimetest.CopyFile
	processesWith = runtimetest.ProcessesWith
)

func testRootfs(t testing.TB) string   { return runtimetest.Rootfs(t, testTmp) }
func directRootfs(t testing.TB) string { return runtimetest.DirectRootfs(t, testTmp) }

func testBundle(t testing.TB, cmd ...string) bundle.Bundle {
	return runtimetest.Bundle(t, testTmp, cmd...)
}

func snapshot(t testing.TB, root string) string { return runtimetest.Snapshot(t, root) }
