package pipeline

import (
	"errors"
	"io/fs"
	"path"
	"path/filepath"
	"sort"
	"strings"

	kptv1 "github.com/kptr-dev/kptr/pipeline/kptfile/v1"
	"sigs.k8s.io/kustomize/kyaml/yaml"
)

const pkgPathAnnotation = "internal.config.kubernetes.io/package-path"

// matchAllKRM are the files of a package that hold resources.
var matchAllKRM = []string{kptv1.KptFileName, "*.yaml", "*.yml", "*.json"}

// pkgNode is one package of the tree being rendered.
type pkgNode struct {
	fs      *pkgFS // the root package's files
	dir     string // absolute, cleaned
	rel     string // relative to the root package, "." for the root
	display string // kpt's DisplayPath: root dir name, then "root/sub"
	kf      *kptv1.KptFile
	subs    []*pkgNode
	subsOK  bool
}

// status is the package's path from the root as kptr names it ("." or
// "./db": Error.Pkg, the errors' text); the Kptfile status names packages
// as kpt does instead (statusMessage).
func (p *pkgNode) status() string {
	if p.rel == "." {
		return "."
	}
	return "./" + filepath.ToSlash(p.rel)
}

// ids is the package's path as status() gives it and its absolute
// directory, for kerr; both "" for a nil package.
func (p *pkgNode) ids() (path, dir string) {
	if p == nil {
		return "", ""
	}
	return p.status(), p.dir
}

// name is the package directory's name in the root package's file system.
func (p *pkgNode) name() string { return filepath.ToSlash(p.rel) }

// loadKptfile reads and validates the package's Kptfile.
func (p *pkgNode) loadKptfile() error {
	kf, err := kptv1.Read(p.fs, p.name(), p.dir, p.status())
	if err != nil {
		return wrap("pkg.read", p, err)
	}
	p.kf = kf
	if err := p.validate(); err != nil {
		return wrap("pkg.read", p, err)
	}
	return nil
}

// validate checks the Kptfile's pipeline (configPath files included).
func (p *pkgNode) validate() error { return p.kf.Validate(p.fs, p.name()) }

func (p *pkgNode) pipeline() *kptv1.Pipeline {
	if p.kf == nil || p.kf.Pipeline == nil {
		return &kptv1.Pipeline{}
	}
	return p.kf.Pipeline
}

// subpackages lists the direct subpackages (directories with a Kptfile not
// nested in another subpackage), sorted by path; their Kptfiles are read.
func (p *pkgNode) subpackages(root *pkgNode) ([]*pkgNode, error) {
	if p.subsOK {
		return p.subs, nil
	}
	// kpt's pkg.Subpackages walks with filepath.Walk: a symlinked
	// directory is never descended into
	var dirs []string
	err := fs.WalkDir(p.fs.files, p.name(), func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if name == p.name() || !d.IsDir() {
			return nil
		}
		if d.Name() == ".git" {
			return filepath.SkipDir
		}
		if _, err := p.fs.files.Stat(path.Join(name, kptv1.KptFileName)); err == nil {
			dirs = append(dirs, name)
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		return nil, wrap("pkg.Subpackages", p, err)
	}
	var subs []*pkgNode
	for _, name := range dirs {
		rel := filepath.FromSlash(name)
		sub := &pkgNode{fs: p.fs, dir: p.fs.abs(name), rel: rel, display: root.display + "/" + name}
		kf, err := kptv1.Read(p.fs, name, sub.dir, sub.status())
		if err != nil {
			return nil, wrap("pkg.Subpackages", sub, err)
		}
		sub.kf = kf
		subs = append(subs, sub)
	}
	sort.Slice(subs, func(i, j int) bool { return subs[i].display < subs[j].display })
	p.subs, p.subsOK = subs, true
	return subs, nil
}

// localResources reads the package's own files (not its subpackages'),
// honouring .krmignore, files in lexical byte order (so the Kptfile first).
func (p *pkgNode) localResources() ([]*yaml.RNode, error) {
	nodes, err := readPackage(p.fs, p.name())
	var over *PackageLimitError
	if errors.As(err, &over) {
		cp := *over // named relative to the package, as below; the type (exit 2) kept
		cp.File = strings.TrimPrefix(cp.File, p.dir+string(filepath.Separator))
		return nil, wrap("pkg.readResources", p, &cp)
	}
	if err != nil {
		// kptr names the file relative to the package, not by its absolute
		// path; the status message names it as kpt does (statusMessage)
		full := err.Error()
		short := strings.ReplaceAll(full, p.dir+string(filepath.Separator), "")
		return nil, wrap("pkg.readResources", p, inputErr(&fileError{short: short, full: full}))
	}
	return nodes, nil
}

func pkgPathOf(n *yaml.RNode) string {
	return annotation(n, pkgPathAnnotation)
}
