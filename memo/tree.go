package memo

import (
	"io/fs"
	"strconv"
)

// Tree adds every entry of fsys (a directory opened through an os.Root,
// root.FS()) to the key: each directory's and regular file's path and mode,
// and each file's content, streamed. It returns false (and a key that must
// not be used) for a tree holding anything else (a symbolic link, a device,
// a socket), or one that changed or could not be read while it was hashed:
// such a tree is not memoised as a whole.
func (e *KeyBuilder) Tree(fsys fs.FS) bool {
	ok := true
	err := fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		mode := strconv.FormatUint(uint64(info.Mode()), 8)
		switch {
		case d.IsDir():
			e.Str("dir", name+"\x00"+mode)
		case d.Type().IsRegular():
			f, err := fsys.Open(name)
			if err != nil {
				return err
			}
			e.Str("file", name+"\x00"+mode)
			// streamed: a large file that is not YAML costs no memory
			read := e.Read("content", f, info.Size())
			f.Close()
			if !read {
				ok = false // changed while read
				return fs.SkipAll
			}
		default:
			ok = false
			return fs.SkipAll
		}
		return nil
	})
	return ok && err == nil
}
