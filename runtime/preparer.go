package runtime

import (
	"context"

	"github.com/kptr-dev/kptr/bundle"
)

// Preparer is implemented by runners that can set up the sandbox of a run
// ahead of time (Sandbox does): the pipeline calls Prepare for the next
// function while the current one runs. Prepare never fails: when the
// sandbox cannot be prepared, the later Run simply starts it cold.
type Preparer interface {
	Prepare(ctx context.Context, b bundle.Bundle, inv Invocation)
}
