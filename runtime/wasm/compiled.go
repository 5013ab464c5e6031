package wasm

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
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

// A module's directory may also hold what a killed compilation left.
// wazero's file cache writes a module's code, serialised in memory once the
// compilation is done, to a new file beside its final name, in one write
// followed by an fsync, and renames it into place: <key>.<random>.tmp in the
// wazero-<version>-<arch>-<os> directory, key being the entry's SHA-256 in
// hex. A process killed between the create and the rename (SIGKILL at Argo
// CD's deadline, a second Ctrl-C) leaves that file for good: nothing loads
// it, and nothing of wazero's removes it. Another process compiling the same
// module at the same time writes a file of its own under another random
// name, so a young one may be live; the name carries no pid to ask about,
// so only its age tells: one unchanged for staleLeftover (or a prune's
// Grace) has no writer.

// leftoverName matches the temporary names of wazero's file cache, the only
// files a sweep removes.
var leftoverName = regexp.MustCompile(`^[0-9a-f]{64}\.[0-9]+\.tmp$`)

// staleLeftover is how long a temporary file must have been left unchanged
// before a compilation's sweep removes it: a write lasts well under a minute
// even for a catalog module's tens of MiB on a busy disk, and an hour is the
// grace kptr cache prune gives compiled code.
const staleLeftover = time.Hour

// sweepLeftovers removes (unless dry) the temporary files of wazero's file
// cache in the module directory mdir that have not changed for longer than
// stale, and returns their paths beneath mdir and their bytes. Everything
// goes through a handle rooted at mdir, so no link leads it elsewhere.
func sweepLeftovers(mdir string, stale time.Duration, dry bool) ([]string, int64, error) {
	root, err := os.OpenRoot(mdir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, 0, nil
		}
		return nil, 0, err
	}
	defer root.Close()
	subs, err := fs.ReadDir(root.FS(), ".")
	if err != nil {
		return nil, 0, err
	}
	var found []string
	var freed int64
	now := time.Now()
	for _, sub := range subs {
		if !sub.IsDir() || !strings.HasPrefix(sub.Name(), "wazero-") {
			continue
		}
		files, err := fs.ReadDir(root.FS(), sub.Name())
		if err != nil {
			continue // gone meanwhile, or not ours to read (CheckTree says so)
		}
		for _, f := range files {
			if !f.Type().IsRegular() || !leftoverName.MatchString(f.Name()) {
				continue
			}
			info, err := f.Info()
			if err != nil || now.Sub(info.ModTime()) <= stale {
				continue // renamed into place meanwhile, or may be written now
			}
			p := path.Join(sub.Name(), f.Name())
			if !dry {
				if err := root.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return found, freed, err
				}
			}
			found = append(found, p)
			freed += info.Size()
		}
	}
	return found, freed, nil
}

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
// directory (an older layout's files). In the code that stays, the files
// killed compilations left half-written go once unchanged for o.Grace
// (Leftovers). A missing dir is nothing to prune.
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
		if doomed && age >= o.Grace {
			if !o.DryRun {
				if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
					return rep, err
				}
			}
			rep.Removed = append(rep.Removed, name)
			rep.FreedBytes += size
			continue
		}
		if doomed {
			rep.KeptInUse = append(rep.KeptInUse, name)
		}
		if isSum(name) && e.IsDir() {
			// the code stays; what killed compilations of it left need not
			left, freed, err := sweepLeftovers(filepath.Join(dir, name), o.Grace, o.DryRun)
			for _, p := range left {
				rep.Leftovers = append(rep.Leftovers, name+"/"+p)
			}
			rep.FreedBytes += freed
			size -= freed
			if err != nil {
				return rep, err
			}
		}
		rep.TotalBytes += size
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
