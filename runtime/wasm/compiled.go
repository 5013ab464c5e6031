package wasm

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	goruntime "runtime"
	"sort"
	"strings"
	"time"

	"github.com/kptr-dev/kptr/bundle"
	"github.com/kptr-dev/kptr/runtime"
)

// Compiled code on disk. With a cache directory (WithCacheDir), each module's
// compiled code lives in a directory of its own beneath it, named by the
// SHA-256 of the module's bytes (wazero keeps a subdirectory per wazero
// version inside). Every compile or run of a module touches its directory,
// so a prune can tell the code in use from the code left behind.

// compiledDir is where the compiled code of the module whose SHA-256 is sum
// lives.
func compiledDir(base, sum string) string { return filepath.Join(base, sum) }

// touch marks dir used now (best effort: a directory that is not there yet
// is made when the module compiles).
func touch(dir string) {
	now := time.Now()
	_ = os.Chtimes(dir, now, now)
}

// CompiledOnDisk reports whether the cache directory holds compiled code for
// the module whose SHA-256 is sum, for this wazero: its file cache keeps one
// file per compiled module in a directory per wazero version, platform and
// OS beneath the module's directory, renamed into place once written whole
// (the ".tmp" names are writes in progress). Without a cache directory
// nothing is on disk.
func (r *Runner) CompiledOnDisk(sum string) bool {
	if r.cacheDir == "" {
		return false
	}
	dir := filepath.Join(compiledDir(r.cacheDir, sum), "wazero-"+wazeroVersion()+"-"+goruntime.GOARCH+"-"+goruntime.GOOS)
	des, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, de := range des {
		if de.Type().IsRegular() && !strings.HasSuffix(de.Name(), ".tmp") {
			return true
		}
	}
	return false
}

// ModuleSum is the SHA-256 (hex) of b's module, read as a run reads it: what
// names its compiled code.
func ModuleSum(b bundle.Bundle) (string, error) {
	code, err := readModule(b)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(code)
	return hex.EncodeToString(sum[:]), nil
}

// PruneCompiled removes compiled code from dir (a Runner's cache directory)
// by the options: the code of every module whose sum keep does not hold
// (the wasm images no longer cached) goes, and so does anything else in the
// directory (an older layout's files). A missing dir is nothing to prune.
func PruneCompiled(dir string, keep map[string]bool, o runtime.PruneOptions) (runtime.PruneReport, error) {
	var rep runtime.PruneReport
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return rep, nil
	}
	if err != nil {
		return rep, err
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
	now := time.Now()
	for _, e := range ents {
		name := e.Name()
		info, err := e.Info()
		if err != nil {
			continue // gone meanwhile
		}
		size := treeSize(filepath.Join(dir, name))
		age := now.Sub(info.ModTime())
		doomed := o.All || !isSum(name) || !keep[name] || (o.MaxAge > 0 && age > o.MaxAge)
		switch {
		case !doomed:
			rep.TotalBytes += size
		case age < o.Grace:
			rep.KeptInUse = append(rep.KeptInUse, name)
			rep.TotalBytes += size
		default:
			if !o.DryRun {
				if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
					return rep, err
				}
			}
			rep.Removed = append(rep.Removed, name)
			rep.FreedBytes += size
		}
	}
	return rep, nil
}

// isSum reports a name that is a SHA-256 in hex, as compiledDir names.
func isSum(name string) bool {
	if len(name) != 2*sha256.Size {
		return false
	}
	_, err := hex.DecodeString(name)
	return err == nil
}

// treeSize is the bytes of the regular files beneath p (links not followed).
func treeSize(p string) int64 {
	var n int64
	_ = filepath.WalkDir(p, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
