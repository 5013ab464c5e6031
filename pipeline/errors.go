package pipeline

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	kptv1 "github.com/kptr-dev/kptr/pipeline/kptfile/v1"
)

// Error is a failed render or eval. Error() is a one-line summary naming the
// package, the function and the cause; Message() is what kpt prints on
// stderr for it ("" when the transcript already showed the failure).
type Error struct {
	// Pkg is the package (relative to the root) and Function the function
	// (image or exec) involved, when known.
	Pkg, Function string
	err           error
	summary       string
	eval          bool // an eval error: kpt prints it as "error: <cause>"
	// Interrupted: the caller cancelled the run's context; nothing was
	// written and the error's cause is the context's cause.
	Interrupted bool
}

func (e *Error) Error() string { return e.summary }
func (e *Error) Unwrap() error { return e.err }

// ExitCode is kptr's class of the error: 2 when the package or a path the
// user named is at fault (an InputError or a package over its budget,
// PackageLimitError, underneath), else 1. Invoked as
// kpt, the CLI exits 1 for every error, as kpt does.
func (e *Error) ExitCode() int {
	var ie *InputError
	var over *PackageLimitError
	if errors.As(e.err, &ie) || errors.As(e.err, &over) {
		return 2
	}
	return 1
}

// InputError is a failure caused by what the user gave the command, not by
// a function or the environment: a package file that cannot be read or
// parsed, a resource that is not KRM, an output directory that already
// exists, a tag constraint no tag matches. Its text is the cause's.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// inputErr marks err as an InputError (nil stays nil).
func inputErr(err error) error {
	if err == nil {
		return nil
	}
	return &InputError{Err: err}
}

// Message is kpt's CLI rendering of the error, without the trailing " \n",
// Printable (it may quote function output).
func (e *Error) Message() string { return Printable(cliMessage(e.err)) }

// Line is what kpt prints on stderr for the error, newline included ("" when
// the transcript already showed the failure): "Error: <msg> \n" for render,
// "error: <cause>\n" for eval (kpt's eval command reports plain errors so).
func (e *Error) Line() string {
	m := e.Message()
	switch {
	case m == "":
		return ""
	case e.eval:
		return "error: " + strings.TrimPrefix(m, "Error: ") + "\n"
	default:
		return m + " \n"
	}
}

// kerr mirrors kpt's errors.Error: an operation, a package and a cause,
// formatted the way kpt's render status shows them. path is the package as
// kptr names it (root-relative, "." or "./db"); dir is its absolute
// directory, from which the Kptfile status names it as kpt does
// (statusMessage).
type kerr struct {
	op, path, dir string
	err           error
}

func (e *kerr) Error() string {
	return e.format(func(k *kerr) string { return k.path }, error.Error)
}

// format writes e as kpt's errors.Error does, naming a package by pkg and
// a cause that is not a kerr by leaf.
func (e *kerr) format(pkg func(*kerr) string, leaf func(error) string) string {
	var b strings.Builder
	pad := func(s string) {
		if b.Len() > 0 {
			b.WriteString(s)
		}
	}
	if e.op != "" {
		b.WriteString(e.op)
	}
	if e.path != "" {
		pad(": ")
		b.WriteString("pkg " + pkg(e))
	}
	if e.err != nil {
		var inner *kerr
		switch {
		case errors.As(e.err, &inner) && inner == e.err:
			pad(":\n\t")
			b.WriteString(inner.format(pkg, leaf))
		case inner != nil:
			pad(":\n\t")
			b.WriteString(leaf(e.err))
		default:
			pad(": ")
			b.WriteString(leaf(e.err))
		}
	}
	return b.String()
}

func (e *kerr) Unwrap() error { return e.err }

// wrap is kpt's errors.E: a nested error for the same package drops its
// path. pn is the package (nil for none).
func wrap(op string, pn *pkgNode, err error) error {
	path, dir := pn.ids()
	if inner, ok := err.(*kerr); ok && inner.path == path {
		cp := *inner
		cp.path, cp.dir = "", ""
		err = &cp
	}
	return &kerr{op: op, path: path, dir: dir, err: err}
}

// statusMessage is err as the Rendered condition's message words it,
// following kpt main's updateRenderStatus (pkg/lib/kptops/render_executor.go)
// and errors.Error (pkg/lib/errors/errors.go): each package is named by
// its path relative to the working directory, or by its absolute path
// where that relative path would climb out ("..") or cannot be formed; a
// file kptr names relative to its package is named by its absolute path;
// then every occurrence of the root package's directory becomes ".". So
// `kpt fn render p1` names the root "p1" and its bad file "./bad.yaml",
// and a package outside the working directory is ".", its subpackage
// "./db".
func statusMessage(err error, root, cwd string) string {
	pkg := func(k *kerr) string {
		if cwd == "" {
			return k.dir
		}
		rel, err := filepath.Rel(cwd, k.dir)
		if err != nil || strings.HasPrefix(rel, "..") {
			return k.dir
		}
		return rel
	}
	leaf := func(err error) string {
		s := err.Error()
		var fe *fileError
		if errors.As(err, &fe) {
			s = strings.Replace(s, fe.short, fe.full, 1)
		}
		return s
	}
	var msg string
	if ke, ok := err.(*kerr); ok {
		msg = ke.format(pkg, leaf)
	} else {
		msg = leaf(err)
	}
	return strings.ReplaceAll(msg, root, ".")
}

// fileError is a package file that could not be read. Its text names the
// file relative to its package, as kptr prints it (short); full names it by
// its absolute path, as kpt's reader does, for the status message.
type fileError struct{ short, full string }

func (e *fileError) Error() string { return e.short }

// errHandled: the transcript already shows this failure (a function exited non-zero).
var errHandled = errors.New("already handled error")

// execError is a function that ran and failed, or could not run (exit 125).
type execError struct {
	exitCode int
	stderr   string
}

func (e *execError) Error() string {
	return fmt.Sprintf("exit code %d", e.exitCode)
}

// cliMessage renders err as kpt's CLI does (its error resolvers, else the
// innermost cause).
func cliMessage(err error) string {
	var ke *kptv1.KptfileError
	var dep *kptv1.DeprecatedKptfileError
	var ve *kptv1.ValidateError
	var nk *noKptfileError
	var le *OutputLimitError
	switch {
	case errors.Is(err, errHandled):
		return ""
	case errors.As(err, &nk):
		return fmt.Sprintf("Error: No Kptfile found at %q.", nk.path)
	case errors.As(err, &dep) && errors.As(err, &ke):
		return fmt.Sprintf("Error: Kptfile at %q has an old version (%q) of the Kptfile schema.\n"+
			"Please update the package to the latest format by following https://kpt.dev/installation/migration.", ke.Path, dep.Version)
	case errors.As(err, &ke):
		msg := fmt.Sprintf("Error: Kptfile at %q can't be read.", ke.Path)
		if d := ke.Err.Error(); d != "" {
			msg += "\n\nDetails:\n" + d
		}
		return msg
	case errors.As(err, &ve):
		return ve.Error()
	case errors.As(err, &le) && le.Function != "":
		return "Error: " + le.Function + ": " + le.Error()
	}
	// innermost cause below kpt's wrapping
	for {
		ke, ok := err.(*kerr)
		if !ok || ke.err == nil {
			break
		}
		err = ke.err
	}
	return "Error: " + err.Error()
}

type noKptfileError struct{ path string }

func (e *noKptfileError) Error() string { return fmt.Sprintf("No Kptfile found at %q.", e.path) }
