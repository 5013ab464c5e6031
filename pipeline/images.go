package pipeline

import (
	"context"
	"io/fs"
	"path"
	"path/filepath"
	"sort"

	kptv1 "github.com/kptr-dev/kptr/pipeline/kptfile/v1"
)

// Images lists every function image named by every Kptfile under dir (all
// packages, mutators and validators), resolved as Render resolves them:
// prefix for bare names, ":latest" when untagged, Kptfile `tag:` applied
// (constraints through opts.Resolver if it is a ConstraintResolver).
// exec functions are not listed. The result is sorted and unique.
func Images(dir string, opts Options) ([]string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	fsys, err := openPkgFS(abs)
	if err != nil {
		return nil, err
	}
	defer fsys.Close()
	return images(fsys, &opts)
}

// images is Images of the package fsys holds.
func images(fsys *pkgFS, opts *Options) ([]string, error) {
	seen := map[string]bool{}
	// through the package's root: a Kptfile linked from outside the
	// package is an error, a linked directory is not walked
	err := fs.WalkDir(fsys.files, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" || d.Name() == txDirName {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Name() != kptv1.KptFileName {
			return nil
		}
		pkg := path.Dir(name)
		kf, err := kptv1.Read(fsys, pkg, fsys.abs(pkg), pkg)
		if err != nil {
			return err
		}
		if kf.Pipeline == nil {
			return nil
		}
		for _, f := range append(append([]kptv1.Function{}, kf.Pipeline.Mutators...), kf.Pipeline.Validators...) {
			if f.Image == "" {
				continue
			}
			img, err := resolveImage(context.Background(), f, opts, true)
			if err != nil {
				return err
			}
			seen[img] = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(seen))
	for img := range seen {
		out = append(out, img)
	}
	sort.Strings(out)
	return out, nil
}
