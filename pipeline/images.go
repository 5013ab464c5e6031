package pipeline

import (
	"context"
	"os"
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
	seen := map[string]bool{}
	err = filepath.Walk(abs, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if info.IsDir() {
			if info.Name() == ".git" || info.Name() == txDirName {
				return filepath.SkipDir
			}
			return nil
		}
		if info.Name() != kptv1.KptFileName {
			return nil
		}
		pkgDir := filepath.Dir(path)
		rel, _ := filepath.Rel(abs, pkgDir)
		kf, err := kptv1.Read(pkgDir, rel)
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
			img, err := resolveImage(context.Background(), f, &opts, true)
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
