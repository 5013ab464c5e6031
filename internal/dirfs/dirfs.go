// Package dirfs is an os.Root whose cost per name does not grow with the
// name's depth.
//
// An os.Root resolves every name one component at a time from the root
// (an openat per directory on the way), so walking a tree costs the sum of
// its names' depths: 2,000 nested directories took two million openat
// calls and 43 s of CPU to walk (issue 30). FS keeps the directories on the
// way to the last one it looked up open, each opened from its parent as an
// os.Root of its own, and resolves a name from the deepest of them that
// holds it: a depth-first walk then opens one component per name. Whatever
// a held directory cannot resolve (a symbolic link out of it, an error) is
// resolved from the root again, so every answer, error and refusal is the
// root's: nothing is reached that the root would not reach.
//
// The deepest maxHeld directories on the way are held open, and every
// checkpoint-th level above them, so that the way back up a deep tree
// reopens at most checkpoint levels at a time (2,000 levels hold 95
// handles); a handle is closed only once no call is using it, so FS is
// safe for concurrent use.
package dirfs

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
)

// maxHeld bounds the directory handles an FS holds open beside its
// checkpoints, one every checkpoint levels.
const (
	maxHeld    = 64
	checkpoint = 64
)

// FS is root's fs.FS (fs.ReadDirFS, fs.StatFS) plus OpenFile and Lstat.
type FS struct {
	root *os.Root

	mu    sync.Mutex
	chain []*held // held ancestors of the last directory looked up and itself, shallowest first
	// Components counts the name components os.Root resolved for this FS
	// (tests: a walk's cost is linear in its names).
	Components int
}

// held is an open directory: name is slash-separated, relative to root.
type held struct {
	name    string
	depth   int // components in name
	r       *os.Root
	refs    int
	dropped bool
}

// New returns root's FS; Close closes the handles it holds, not root.
func New(root *os.Root) *FS { return &FS{root: root} }

// Close closes every directory handle held (not the root).
func (f *FS) Close() error {
	f.Forget()
	return nil
}

// Forget lets go of the directories held: a later lookup opens its way
// again. The tree is assumed not to change while directories are held (a
// held directory removed or moved answers for its old name): whoever
// changes it through the root calls Forget first and after.
func (f *FS) Forget() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, h := range f.chain {
		f.drop(h)
	}
	f.chain = nil
}

// drop closes h once it is not in use; f.mu is held.
func (f *FS) drop(h *held) {
	h.dropped = true
	if h.refs == 0 {
		h.r.Close()
	}
}

// within reports whether name is dir or lies beneath it.
func within(name, dir string) bool {
	return name == dir || strings.HasPrefix(name, dir+"/")
}

// dir returns a handle on directory name (slash-separated, cleaned, not
// ".") and its release, or ok false when it cannot be opened that way (the
// caller then asks the root).
func (f *FS) dir(name string) (r *os.Root, release func(), ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	// the deepest held ancestor (the chain is one path: looked for from
	// its end, where a walk's next name is); the rest of the chain goes
	keep := len(f.chain)
	for keep > 0 && !within(name, f.chain[keep-1].name) {
		keep--
	}
	for _, h := range f.chain[keep:] {
		f.drop(h)
	}
	f.chain = f.chain[:keep]
	cur, curName, depth := f.root, "", 0
	if keep > 0 {
		cur, curName, depth = f.chain[keep-1].r, f.chain[keep-1].name, f.chain[keep-1].depth
	}
	rest := strings.TrimPrefix(strings.TrimPrefix(name, curName), "/")
	if rest != "" {
		for _, c := range strings.Split(rest, "/") {
			f.Components++
			next, err := cur.OpenRoot(c)
			if err != nil {
				return nil, nil, false
			}
			if curName != "" {
				curName += "/"
			}
			curName += c
			depth++
			f.chain = append(f.chain, &held{name: curName, depth: depth, r: next})
			cur = next
			f.trim()
		}
	}
	h := f.chain[len(f.chain)-1]
	h.refs++
	return h.r, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if h.refs--; h.refs == 0 && h.dropped {
			h.r.Close()
		}
	}, true
}

// trim drops the shallowest held directory that is no checkpoint while
// more than maxHeld are; f.mu is held.
func (f *FS) trim() {
	n := 0
	for _, h := range f.chain {
		if h.depth%checkpoint != 0 {
			n++
		}
	}
	for i := 0; n > maxHeld && i < len(f.chain); {
		if h := f.chain[i]; h.depth%checkpoint != 0 {
			f.drop(h)
			f.chain = slices.Delete(f.chain, i, i+1)
			n--
			continue
		}
		i++
	}
}

// do runs op on the held directory of name's parent with name's last
// component, or on the root with the whole name when that fails for any
// reason but the name's absence (which the root would find too: a link
// leading out of the held directory is refused as an escape, never as
// missing).
func do[T any](f *FS, name string, op func(r *os.Root, name string) (T, error)) (T, error) {
	if dir, base := path.Split(name); dir != "" && base != "" {
		if r, release, ok := f.dir(path.Clean(dir)); ok {
			v, err := op(r, base)
			release()
			f.count(1)
			if err == nil || errors.Is(err, fs.ErrNotExist) {
				return v, err
			}
		}
	}
	f.count(strings.Count(name, "/") + 1)
	return op(f.root, name)
}

func (f *FS) count(n int) {
	f.mu.Lock()
	f.Components += n
	f.mu.Unlock()
}

// OpenFile is os.Root.OpenFile.
func (f *FS) OpenFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	return do(f, name, func(r *os.Root, n string) (*os.File, error) { return r.OpenFile(n, flag, perm) })
}

// Open is fs.FS's Open.
func (f *FS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	return f.OpenFile(name, os.O_RDONLY, 0)
}

// Stat is os.Root.Stat (fs.StatFS).
func (f *FS) Stat(name string) (fs.FileInfo, error) {
	return do(f, name, func(r *os.Root, n string) (fs.FileInfo, error) { return r.Stat(n) })
}

// Lstat is os.Root.Lstat.
func (f *FS) Lstat(name string) (fs.FileInfo, error) {
	return do(f, name, func(r *os.Root, n string) (fs.FileInfo, error) { return r.Lstat(n) })
}

// ReadDir is fs.ReadDirFS's ReadDir: the entries sorted by name. The
// directory is held, so that its entries resolve from it.
func (f *FS) ReadDir(name string) ([]fs.DirEntry, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrInvalid}
	}
	var ents []fs.DirEntry
	err := fs.ErrInvalid
	if name != "." {
		if r, release, ok := f.dir(name); ok {
			ents, err = readDir(r)
			release()
		}
	}
	if err != nil {
		f.count(strings.Count(name, "/") + 1)
		if ents, err = fs.ReadDir(f.root.FS(), name); err != nil {
			return ents, err
		}
	}
	for i, e := range ents {
		ents[i] = entry{e, f, path.Join(name, e.Name())}
	}
	return ents, nil
}

func readDir(r *os.Root) ([]fs.DirEntry, error) {
	d, err := r.Open(".")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	ents, err := d.ReadDir(-1)
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return ents, err
}

// entry is a directory entry whose Info is the FS's Lstat (os's would
// look the entry up by its whole path, from the file system's root).
type entry struct {
	fs.DirEntry
	f    *FS
	name string
}

func (e entry) Info() (fs.FileInfo, error) { return e.f.Lstat(e.name) }
