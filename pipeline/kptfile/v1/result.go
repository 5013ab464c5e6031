package v1

import "github.com/kptr-dev/kptr/pipeline/kptfile/v1/internal/framework"

// Result is one item of a function's results, kpt's (and the KRM functions
// specification's) shape: kyaml's fn/framework.Result field for field and
// tag for tag, declared by kptr (in a package named framework, so that
// decoding errors name the type as kpt's do) so that the kptr binary does
// not link fn/framework (see framework.Result).
type Result = framework.Result

// Severity of a Result.
type Severity = framework.Severity

// Severities a function may give a Result ("" reads as info).
const (
	Error   = framework.Error
	Warning = framework.Warning
	Info    = framework.Info
)

// File is the file a Result is about.
type File = framework.File

// Field is the field a Result is about, with its current and proposed
// values.
type Field = framework.Field
