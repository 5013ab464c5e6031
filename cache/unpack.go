package cache

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"
)

// unpacker applies layers, in order, to a root directory that only it writes
// (a fresh directory under tmp/). Nothing in a layer is trusted: every path is
// resolved inside root, links are never followed at the leaf, and the limits
// bound what one image may write.
type unpacker struct {
	root     string
	limits   Limits
	files    int
	bytes    int64
	dirModes map[string]os.FileMode // host path → final mode, applied last
	sums     map[string]string      // host path → sha256 of a regular file's content
	layer    map[string]bool        // host paths created by the current layer
	skipped  int                    // device nodes and fifos left out
	buf      []byte
}

func newUnpacker(root string, l Limits) *unpacker {
	return &unpacker{root: root, limits: l, dirModes: map[string]os.FileMode{}, sums: map[string]string{}, buf: make([]byte, 128<<10)}
}

func hostile(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrHostile, fmt.Sprintf(format, a...))
}

// decompress sniffs gzip and zstd magic numbers; anything else is a plain tar.
func decompress(r io.Reader) (io.Reader, func(), error) {
	br := bufio.NewReaderSize(r, 64<<10)
	magic, _ := br.Peek(4)
	switch {
	case len(magic) >= 2 && magic[0] == 0x1f && magic[1] == 0x8b:
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, nil, err
		}
		return zr, func() { zr.Close() }, nil
	case bytes.Equal(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true), zstd.WithDecoderMaxWindow(64<<20))
		if err != nil {
			return nil, nil, err
		}
		return zr, zr.Close, nil
	}
	return br, func() {}, nil
}

// limitedReader fails, rather than ends, past its limit: a decompression bomb
// is an error, not a silently short layer.
type limitedReader struct {
	r   io.Reader
	n   int64
	max int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	l.n += int64(n)
	if l.n > l.max {
		return n, hostile("layer decompresses to more than the %d byte limit", l.max)
	}
	return n, err
}

// apply extracts one layer blob. diffID, when not empty, is the expected
// sha256 of the uncompressed tar ("sha256:<hex>").
func (u *unpacker) apply(blob io.Reader, diffID string) error {
	u.layer = map[string]bool{}
	dr, done, err := decompress(blob)
	if err != nil {
		return fmt.Errorf("decompressing: %w", err)
	}
	defer done()
	hs := sha256.New()
	// Tar headers and padding add to the content bytes; allow generously.
	lr := &limitedReader{r: dr, max: u.limits.MaxBytes + int64(u.limits.MaxFiles)*1024 + 1<<20}
	tee := io.TeeReader(lr, hs)
	tr := tar.NewReader(tee)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("reading tar: %w", err)
		}
		if err := u.entry(tr, hdr); err != nil {
			return err
		}
	}
	// The rest of the stream (end-of-archive padding) counts for the diff ID.
	if _, err := io.CopyBuffer(io.Discard, tee, u.buf); err != nil {
		return fmt.Errorf("reading tar: %w", err)
	}
	if diffID != "" {
		if got := "sha256:" + hex.EncodeToString(hs.Sum(nil)); got != diffID {
			return fmt.Errorf("uncompressed layer is %s, the image config says %s", got, diffID)
		}
	}
	return nil
}

// cleanName validates an entry name: relative, no "..", not empty.
func cleanName(n string) (string, error) {
	if strings.HasPrefix(n, "/") {
		return "", hostile("entry %q has an absolute path", n)
	}
	var parts []string
	for _, p := range strings.Split(n, "/") {
		switch p {
		case "", ".":
			continue
		case "..":
			return "", hostile("entry %q escapes the root through ..", n)
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "/"), nil
}

// resolveDir returns the host path of directory rel inside the root,
// following symlinks as if root were "/" and creating missing directories.
// A symlink whose target climbs above the root is an error.
func (u *unpacker) resolveDir(rel, entry string) (string, error) {
	todo := splitPath(rel)
	var done []string
	links := 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(done) == 0 {
				return "", hostile("entry %q: a symlink on its path points outside the root", entry)
			}
			done = done[:len(done)-1]
			continue
		}
		p := filepath.Join(u.root, filepath.Join(done...), c)
		fi, err := os.Lstat(p)
		switch {
		case errors.Is(err, os.ErrNotExist):
			if err := os.Mkdir(p, 0o755); err != nil {
				return "", err
			}
			u.layer[p] = true
			u.dirModes[p] = 0o755 | os.ModeDir
		case err != nil:
			return "", err
		case fi.Mode()&os.ModeSymlink != 0:
			if links++; links > 40 {
				return "", hostile("entry %q: too many levels of symlinks", entry)
			}
			t, err := os.Readlink(p)
			if err != nil {
				return "", err
			}
			if strings.HasPrefix(t, "/") {
				done = nil
			}
			todo = append(splitPath(t), todo...)
			continue
		case !fi.IsDir():
			return "", hostile("entry %q: %s is not a directory", entry, path.Join(append(done, c)...))
		}
		done = append(done, c)
	}
	return filepath.Join(u.root, filepath.Join(done...)), nil
}

func splitPath(p string) []string {
	return strings.FieldsFunc(p, func(r rune) bool { return r == '/' })
}

// removeLeaf deletes whatever is at p (never following a symlink) unless it
// is a directory and keepDir is set.
func removeLeaf(p string, keepDir bool) error {
	fi, err := os.Lstat(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.IsDir() {
		if keepDir {
			return nil
		}
		return os.RemoveAll(p)
	}
	return os.Remove(p)
}

func (u *unpacker) entry(tr *tar.Reader, hdr *tar.Header) error {
	if hdr.Typeflag == tar.TypeXGlobalHeader {
		return nil
	}
	if u.files++; u.files > u.limits.MaxFiles {
		return hostile("more than the %d file limit", u.limits.MaxFiles)
	}
	rel, err := cleanName(hdr.Name)
	if err != nil {
		return err
	}
	if rel == "" { // the root itself keeps its mode
		return nil
	}
	dir, base := path.Split(rel)
	parent, err := u.resolveDir(dir, hdr.Name)
	if err != nil {
		return err
	}
	leaf := filepath.Join(parent, base)

	if strings.HasPrefix(base, ".wh.") {
		return u.whiteout(parent, base, hdr.Name)
	}
	mode := treeMode(hdr.Mode)

	switch hdr.Typeflag {
	case tar.TypeDir:
		if err := removeLeaf(leaf, true); err != nil {
			return err
		}
		if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
		u.dirModes[leaf] = mode | os.ModeDir
	case tar.TypeReg, tar.TypeRegA:
		if hdr.Size < 0 || hdr.Size > u.limits.MaxBytes-u.bytes {
			return hostile("entry %q: content exceeds the %d byte size limit", hdr.Name, u.limits.MaxBytes)
		}
		u.bytes += hdr.Size
		if err := removeLeaf(leaf, false); err != nil {
			return err
		}
		if err := u.writeFile(leaf, tr, mode); err != nil {
			return err
		}
	case tar.TypeSymlink:
		if err := removeLeaf(leaf, false); err != nil {
			return err
		}
		if err := os.Symlink(hdr.Linkname, leaf); err != nil {
			return err
		}
		delete(u.sums, leaf)
	case tar.TypeLink:
		trel, err := cleanName(hdr.Linkname)
		if err != nil || trel == "" {
			return hostile("hard link %q -> %q points outside the root", hdr.Name, hdr.Linkname)
		}
		tdir, tbase := path.Split(trel)
		tparent, err := u.resolveDir(tdir, hdr.Name)
		if err != nil {
			return err
		}
		target := filepath.Join(tparent, tbase)
		if target == leaf {
			return nil
		}
		fi, err := os.Lstat(target)
		if err != nil {
			return hostile("hard link %q -> %q: target is not in the image", hdr.Name, hdr.Linkname)
		}
		if fi.IsDir() {
			return hostile("hard link %q -> %q: target is a directory", hdr.Name, hdr.Linkname)
		}
		if err := removeLeaf(leaf, false); err != nil {
			return err
		}
		if err := os.Link(target, leaf); err != nil { // linkat without AT_SYMLINK_FOLLOW
			return err
		}
		if s, ok := u.sums[target]; ok {
			u.sums[leaf] = s
		} else {
			delete(u.sums, leaf)
		}
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		u.skipped++ // device nodes and fifos have no place in a function rootfs
		return nil
	default:
		return nil // PAX/GNU metadata entries the tar reader did not consume
	}
	u.layer[leaf] = true
	return nil
}

// treeMode is the mode an entry of an extracted tree gets: the image's
// permission bits without group and other write, and without setuid,
// setgid and sticky. The tree is shared by every user of the cache and
// never written by a run (the tiers give functions their own /tmp), so a
// bit that lets another user write into it would let them change what the
// cache's owner runs next (a planted file in the image's 1777 /tmp, a
// rewritten program in a 0777 directory); the special bits mean nothing
// in a tree nobody but its owner writes and whose files run without
// privilege.
func treeMode(m int64) os.FileMode { return os.FileMode(m).Perm() &^ 0o022 }

func (u *unpacker) writeFile(p string, r io.Reader, mode os.FileMode) error {
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	hs := sha256.New()
	_, err = io.CopyBuffer(io.MultiWriter(f, hs), r, u.buf)
	if err == nil {
		err = f.Chmod(mode) // through the descriptor
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	u.sums[p] = hex.EncodeToString(hs.Sum(nil))
	return nil
}

func (u *unpacker) whiteout(parent, base, entry string) error {
	if base == ".wh..wh..opq" {
		return u.pruneLower(parent)
	}
	name := strings.TrimPrefix(base, ".wh.")
	if name == "" || name == "." || name == ".." {
		return hostile("bare or invalid whiteout %q", entry)
	}
	return os.RemoveAll(filepath.Join(parent, name)) // removes a symlink, never its target
}

// pruneLower applies an opaque whiteout: everything under dir that lower
// layers put there goes; what this layer wrote stays.
func (u *unpacker) pruneLower(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if !u.layer[p] {
			if err := os.RemoveAll(p); err != nil {
				return err
			}
			continue
		}
		if e.IsDir() && e.Type()&os.ModeSymlink == 0 {
			if err := u.pruneLower(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// finish applies directory modes, deepest first, through descriptors opened
// without following links.
func (u *unpacker) finish() error {
	dirs := make([]string, 0, len(u.dirModes))
	for d := range u.dirModes {
		dirs = append(dirs, d)
	}
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	for _, d := range dirs {
		fd, err := unix.Open(d, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue // replaced by a file or symlink, or removed by a later layer
		}
		err = unix.Fchmod(fd, uint32(u.dirModes[d].Perm()))
		unix.Close(fd)
		if err != nil {
			return err
		}
	}
	return nil
}

// mountpoints are created in every rootfs that lacks them (as Docker has
// them in every container), so a runtime never needs to create one inside
// the shared, read-only rootfs. /tmp is 0755 like the image's own (see
// treeMode): every tier mounts or makes a run's own writable /tmp.
var mountpoints = []struct {
	name string
	mode os.FileMode
}{{"proc", 0o555}, {"dev", 0o755}, {"sys", 0o555}, {"tmp", 0o755}}

func ensureMountpoints(root string) error {
	for _, m := range mountpoints {
		p := filepath.Join(root, m.name)
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			continue // present (whatever it is) or unreadable: leave it
		}
		if err := os.Mkdir(p, 0o755); err != nil {
			return err
		}
		if err := os.Chmod(p, m.mode); err != nil { // past the umask
			return err
		}
	}
	return nil
}

// treeStats is what treeHash found in a tree.
type treeStats struct {
	hash  string // over every entry's path, type, mode, size and content
	files int
	size  int64
	// loose names the first entry another user could have written (its
	// owner neither the current user nor root, or group or other write, or
	// a setuid, setgid or sticky bit treeMode never leaves): "" for none.
	loose string
}

// treeHash is the rootfs marker: a digest over every entry's path, type, mode,
// size and content (or link target), in lexical order. sums supplies content
// hashes computed during extraction; without it, files are read.
func treeHash(root string, sums map[string]string) (treeStats, error) {
	var ts treeStats
	h := sha256.New()
	euid := uint32(os.Geteuid())
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		ts.files++
		if ts.loose == "" {
			ts.loose = looseEntry(p, fi, euid)
		}
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "%s\x00l\x00%s\n", rel, t)
		case fi.IsDir():
			fmt.Fprintf(h, "%s\x00d\x00%o\n", rel, fi.Mode()&(os.ModePerm|os.ModeSticky))
		case fi.Mode().IsRegular():
			s, ok := sums[p]
			if !ok {
				if s, err = hashFile(p, nil); err != nil {
					return err
				}
			}
			ts.size += fi.Size()
			fmt.Fprintf(h, "%s\x00f\x00%o\x00%d\x00%s\n", rel, fi.Mode().Perm(), fi.Size(), s)
		default:
			fmt.Fprintf(h, "%s\x00?\x00%o\n", rel, fi.Mode())
		}
		return nil
	})
	ts.hash = "sha256:" + hex.EncodeToString(h.Sum(nil))
	return ts, err
}

// looseEntry says why another user could have written the tree's entry p
// ("" when none could): the cache's rule (owner.go) for the entries of a
// tree, where a link's own mode means nothing.
func looseEntry(p string, fi fs.FileInfo, euid uint32) string {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != euid && st.Uid != 0 {
		return fmt.Sprintf("%s is owned by uid %d, not by the current user (uid %d) or root", p, st.Uid, euid)
	}
	m := fi.Mode()
	if m&os.ModeSymlink == 0 && (m.Perm()&0o022 != 0 || m&(os.ModeSetuid|os.ModeSetgid|os.ModeSticky) != 0) {
		return fmt.Sprintf("%s has mode %s: group or others may write it, or it has a bit kptr never extracts", p, m)
	}
	return ""
}

var _ hash.Hash = sha256.New()
