package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// resolvePkgSymlink resolves a package path that is itself a symbolic link,
// as kpt's fn render and fn eval do (argutil.ResolveSymlink), printing kpt's
// warning to warn when it is not nil. Without it, the package walk does not
// descend into a symlinked root: render silently skipped every subpackage and
// prewarm found no images at all. Paths that are not symlinks are returned as
// given (their errors are reported where they were before).
func resolvePkgSymlink(path string, warn io.Writer) (string, error) {
	st, err := os.Lstat(path)
	if err != nil || st.Mode().Type() != os.ModeSymlink {
		return path, nil
	}
	rp, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", err
	}
	if warn != nil {
		fmt.Fprintf(warn, "[WARN] resolved symlink %q to %q, please note that the symlinks within the package are ignored\n", path, rp)
	}
	return rp, nil
}

// kptResolveSymlink is kpt's argutil.ResolveSymlink exactly, for fn render
// and fn eval: every path is resolved (a missing one is kpt's "lstat ...: no
// such file or directory"), and a path that is a symlink gets kpt's warning.
func kptResolveSymlink(path string, warn io.Writer) (string, error) {
	isSymlink := false
	if st, err := os.Lstat(path); err == nil && st.Mode().Type() == os.ModeSymlink {
		isSymlink = true
	}
	rp, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", err
	}
	if isSymlink {
		fmt.Fprintf(warn, "[WARN] resolved symlink %q to %q, please note that the symlinks within the package are ignored\n", path, rp)
	}
	return rp, nil
}
