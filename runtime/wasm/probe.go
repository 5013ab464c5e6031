package wasm

import (
	"context"
	"fmt"
	goruntime "runtime"
	"runtime/debug"
	"time"

	"github.com/tetratelabs/wazero"
)

// probeModule is the smallest module with a wasip1 entry point: _start
// returns at once.
var probeModule = []byte{
	0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version 1
	0x01, 0x04, 0x01, 0x60, 0x00, 0x00, // one type: () -> ()
	0x03, 0x02, 0x01, 0x00, // one function of that type
	0x07, 0x0a, 0x01, 0x06, '_', 's', 't', 'a', 'r', 't', 0x00, 0x00, // export it as _start
	0x0a, 0x04, 0x01, 0x02, 0x00, 0x0b, // its body: no locals, end
}

// Probe compiles and runs a trivial module the way every run does, and
// describes the engine: what `kptr doctor` reports. It needs nothing of the
// kernel beyond what kptr's own process has (memory that can be made
// executable for the compiler), so it holds in any pod.
func Probe(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCloseOnContextDone(true))
	defer rt.Close(ctx)
	if _, err := rt.Instantiate(ctx, probeModule); err != nil {
		return "", fmt.Errorf("running a test module: %s", firstLine(err.Error()))
	}
	engine := "interpreter"
	if goruntime.GOARCH == "amd64" || goruntime.GOARCH == "arm64" {
		engine = "compiler"
	}
	return fmt.Sprintf("wazero %s, %s", wazeroVersion(), engine), nil
}

// wazeroVersion is the version wazero names its compilation cache's
// directories by (its own fallback is "dev").
func wazeroVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/tetratelabs/wazero" {
				return d.Version
			}
		}
	}
	return "dev"
}
