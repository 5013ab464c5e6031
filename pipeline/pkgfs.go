package pipeline

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/kptr-dev/kptr/internal/dirfs"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// pkgFS is a package directory opened as an os.Root: every read, write,
// rename, mkdir and removal of a package file goes through it, so no
// symbolic link is ever followed out of the package, whatever the caller
// forgot to check. Symbolic links that stay inside the package are followed
// as kpt follows them: a symlinked file is read and written through its
// link, a symlinked directory is not walked (kyaml's LocalPackageReader
// walks with filepath.Walk, which does not descend into links; kyaml
// kio/pkgio_reader.go) but a resource path through it is written to its
// target (kyaml's LocalPackageWriter writes with os.WriteFile; kio/pkgio_writer.go).
// A link that leaves the package is an error naming the file and the link.
//
// Names given to its methods are package-relative, slash or OS separated;
// abs turns one into the absolute path kyaml's reader and messages use.
type pkgFS struct {
	dir  string // absolute, cleaned
	root *os.Root
	// files reads through root at a cost that does not grow with a name's
	// depth (dirfs): every read, stat and walk goes through it
	files *dirfs.FS

	budgetOnce sync.Once
	budget     *packageBudget // what the package reader may still read (pkgbudget.go)
}

// setPackageLimits sets the budget of the package tree read through p; call
// it before the first read (else the defaults apply).
func (p *pkgFS) setPackageLimits(l PackageLimits) {
	p.budgetOnce.Do(func() { p.budget = newPackageBudget(l) })
}

// packageBudget is the budget set by setPackageLimits, else the default.
func (p *pkgFS) packageBudget() *packageBudget {
	p.setPackageLimits(PackageLimits{})
	return p.budget
}

// readWithin reads a package file through the root within budget b,
// measured on the open file before a byte is read.
func (p *pkgFS) readWithin(b *packageBudget, name string) ([]byte, error) {
	f, err := p.open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	return b.read(p.abs(name), f, st.Size())
}

func openPkgFS(dir string) (*pkgFS, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	return &pkgFS{dir: dir, root: r, files: dirfs.New(r)}, nil
}

func (p *pkgFS) Close() error {
	p.files.Close()
	return p.root.Close()
}

func (p *pkgFS) abs(name string) string { return filepath.Join(p.dir, filepath.FromSlash(name)) }

// rel is the package-relative name of abs, a path under p.dir.
func (p *pkgFS) rel(abs string) (string, error) {
	r, err := filepath.Rel(p.dir, abs)
	if err != nil || !filepath.IsLocal(r) && r != "." {
		return "", fmt.Errorf("%s is not inside the package %s", abs, p.dir)
	}
	return r, nil
}

// escapeError is a package path that a symbolic link leads out of the package.
type escapeError struct{ name, link string }

func (e *escapeError) Error() string {
	if e.link == "" {
		return fmt.Sprintf("%s: path leads outside the package", e.name)
	}
	if e.name == e.link {
		return fmt.Sprintf("%s: symbolic link to a location outside the package (kptr never follows a link out of a package)", e.name)
	}
	return fmt.Sprintf("%s: symbolic link %s leads outside the package (kptr never follows a link out of a package)", e.name, e.link)
}

// nonBlock opens a FIFO without waiting for a writer (open then refuses it).
const nonBlock = syscall.O_NONBLOCK

// maxLinks bounds symbolic link resolution, as the kernel's ELOOP does.
const maxLinks = 40

// resolve returns the package-relative path that name designates once the
// symbolic links on its way (its last component included) are followed,
// each of which must stay inside the package; components that do not
// exist yet are kept as given, and every existing one but the last must be
// a directory. It explains what os.Root enforces anyway: writes use its
// result so that a symlinked file is written through, never replaced.
func (p *pkgFS) resolve(name string) (string, error) {
	todo := strings.Split(filepath.ToSlash(name), "/")
	var done []string
	links, lastLink := 0, ""
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(done) == 0 {
				return "", &escapeError{name: name, link: lastLink}
			}
			done = done[:len(done)-1]
			continue
		}
		cur := path.Join(append(done, c)...)
		st, err := p.root.Lstat(cur)
		if errors.Is(err, fs.ErrNotExist) {
			done = append(done, append([]string{c}, todo...)...)
			break
		}
		if err != nil {
			return "", err
		}
		if st.Mode()&fs.ModeSymlink != 0 {
			target, err := p.root.Readlink(cur)
			if err != nil {
				return "", err
			}
			if links++; links > maxLinks || path.IsAbs(target) {
				return "", &escapeError{name: name, link: cur}
			}
			lastLink = cur
			// a relative target is resolved from the link's directory,
			// which done holds
			todo = append(strings.Split(target, "/"), todo...)
			continue
		}
		if len(todo) > 0 && !st.IsDir() {
			return "", fmt.Errorf("%s: %s is not a directory", name, cur)
		}
		done = append(done, c)
	}
	if len(done) == 0 {
		return ".", nil
	}
	return path.Join(done...), nil
}

// explain turns an os.Root error on name into the escape it was, if it was one.
func (p *pkgFS) explain(name string, err error) error {
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if _, rerr := p.resolve(name); rerr != nil {
		var e *escapeError
		if errors.As(rerr, &e) {
			return e
		}
	}
	return err
}

// Open opens a package file or directory for reading (fs.FS); a file must
// be a regular one, so that a FIFO or device in a package cannot stall or
// feed a read.
func (p *pkgFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	return p.open(name)
}

func (p *pkgFS) open(name string) (*os.File, error) {
	f, err := p.files.OpenFile(name, os.O_RDONLY|nonBlock, 0)
	if err != nil {
		err = p.explain(name, err)
		// worded as os.Open words it (kpt's messages quote it)
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = &fs.PathError{Op: "open", Path: p.abs(name), Err: pe.Err}
		}
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() && !st.IsDir() {
		f.Close()
		return nil, errors.New("not a regular file")
	}
	return f, nil
}

// ReadFile reads a regular package file (fs.ReadFileFS).
func (p *pkgFS) ReadFile(name string) ([]byte, error) {
	f, err := p.open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// kyamlFS lets kyaml's LocalPackageReader pick a package's files (its
// .krmignore, subpackage and glob rules) while every access goes through
// the package's root. Paths are absolute, under the package directory, as
// kyaml passes them; it is read-only.
type kyamlFS struct{ p *pkgFS }

var _ filesys.FileSystem = kyamlFS{}

var errReadOnly = errors.New("package reader is read-only")

func (k kyamlFS) name(abs string) (string, error) {
	r, err := k.p.rel(abs)
	return filepath.ToSlash(r), err
}

func (k kyamlFS) Create(string) (filesys.File, error) { return nil, errReadOnly }
func (k kyamlFS) Mkdir(string) error                  { return errReadOnly }
func (k kyamlFS) MkdirAll(string) error               { return errReadOnly }
func (k kyamlFS) RemoveAll(string) error              { return errReadOnly }
func (k kyamlFS) WriteFile(string, []byte) error      { return errReadOnly }

func (k kyamlFS) Glob(string) ([]string, error) {
	return nil, errors.New("package reader does not glob")
}

func (k kyamlFS) Open(abs string) (filesys.File, error) {
	n, err := k.name(abs)
	if err != nil {
		return nil, err
	}
	f, err := k.p.open(n)
	if err != nil {
		return nil, err
	}
	// kyaml's package reader (readTree: eval, source) reads files through
	// Open: a regular file is measured against the package budget first
	// (read once within it, counted, dropped), before kyaml decodes it
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
		b := k.p.packageBudget()
		data, err := b.read(abs, f, st.Size())
		if err == nil {
			err = b.countBeforeDecode(abs, data)
		}
		if err == nil {
			_, err = f.Seek(0, io.SeekStart)
		}
		if err != nil {
			f.Close()
			return nil, err
		}
	}
	return f, nil
}

func (k kyamlFS) stat(abs string) (fs.FileInfo, error) {
	n, err := k.name(abs)
	if err != nil {
		return nil, err
	}
	return k.p.files.Stat(n)
}

func (k kyamlFS) IsDir(abs string) bool {
	st, err := k.stat(abs)
	return err == nil && st.IsDir()
}

func (k kyamlFS) Exists(abs string) bool {
	_, err := k.stat(abs)
	return err == nil
}

func (k kyamlFS) ReadDir(abs string) ([]string, error) {
	n, err := k.name(abs)
	if err != nil {
		return nil, err
	}
	ents, err := k.p.files.ReadDir(n)
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	return names, err
}

func (k kyamlFS) CleanedAbs(abs string) (filesys.ConfirmedDir, string, error) {
	abs = filepath.Clean(abs)
	if k.IsDir(abs) {
		return filesys.ConfirmedDir(abs), "", nil
	}
	dir, file := filepath.Split(abs)
	if k.IsDir(dir) {
		return filesys.ConfirmedDir(filepath.Clean(dir)), file, nil
	}
	return "", "", fmt.Errorf("first part of '%s' not a directory", abs)
}

func (k kyamlFS) ReadFile(abs string) ([]byte, error) {
	n, err := k.name(abs)
	if err != nil {
		return nil, err
	}
	// only package files are read through kyamlFS (readTree's reader):
	// within the package budget, counted before kyaml decodes them
	b := k.p.packageBudget()
	data, err := k.p.readWithin(b, n)
	if err == nil {
		err = b.countBeforeDecode(abs, data)
	}
	if err != nil {
		return nil, err
	}
	return data, nil
}

// Walk is filepath.Walk over the root: lexical order, entries described by
// Lstat (a symbolic link is never descended into).
func (k kyamlFS) Walk(abs string, fn filepath.WalkFunc) error {
	n, err := k.name(abs)
	if err != nil {
		return err
	}
	return fs.WalkDir(k.p.files, n, func(name string, d fs.DirEntry, err error) error {
		var info fs.FileInfo
		if d != nil {
			if i, ierr := d.Info(); ierr == nil {
				info = i
			} else if err == nil {
				err = ierr
			}
		}
		return fn(k.p.abs(name), info, err)
	})
}
