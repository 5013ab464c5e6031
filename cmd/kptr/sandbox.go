package main

import (
	"errors"

	"github.com/kptr-dev/kptr/runtime"
)

// newRunner returns the function runner the global flags describe: the
// sandbox, or the host runner under --sandbox=none. STUB.
func (g *globals) newRunner() (runtime.Runner, error) {
	return nil, withCode(exitEnv, errors.New("runtime: not implemented"))
}
