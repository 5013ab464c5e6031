package wasm

import (
	"crypto/rand"
	"io"
	"time"
)

// The global object a Go js/wasm program sees: the constructors syscall/js
// and the standard library use (Object, Array, Uint8Array, Date), the
// Node-like fs and process objects Go's syscall package is written against,
// and crypto/performance for completeness. The file system is empty: stdin,
// stdout and stderr are the only descriptors, and every path is absent.

// Node's open flags as the fs.constants object announces them (Go maps its
// own O_ flags onto these).
const (
	nodeWRONLY    = 1
	nodeRDWR      = 2
	nodeCREAT     = 64
	nodeEXCL      = 128
	nodeTRUNC     = 512
	nodeAPPEND    = 1024
	nodeDIRECTORY = 65536
)

func (h *jsHost) defineGlobals() {
	g := h.global
	objectCtor := &jsObject{props: map[string]any{}}
	objectCtor.construct = func([]any) any {
		o := newObject()
		o.ctor = objectCtor
		return o
	}
	arrayCtor := &jsObject{props: map[string]any{}}
	arrayCtor.construct = func(args []any) any {
		n, _ := arg(args, 0).(float64)
		if n < 0 || n > 1<<20 {
			throwError("", "Invalid array length")
		}
		a := &jsArray{items: make([]any, int(n))}
		h.values.budget.charge(valueCost(a))
		for i := range a.items {
			a.items[i] = undefined
		}
		return a
	}
	bytesCtor := &jsObject{props: map[string]any{}}
	bytesCtor.construct = func(args []any) any {
		n, _ := arg(args, 0).(float64)
		if n < 0 || n > 1<<30 {
			throwError("", "Invalid typed array length")
		}
		// checked against the budget now, charged when a reference to it is
		// handed out (valueTable.ref)
		h.values.budget.charge(int64(n))
		h.values.budget.refund(int64(n))
		return &jsBytes{b: make([]byte, int(n))}
	}
	dateCtor := &jsObject{props: map[string]any{}}
	dateCtor.construct = func([]any) any {
		d := newObject()
		d.ctor = dateCtor
		// functions run in UTC: no zone of the host is passed
		d.props["getTimezoneOffset"] = newFunc(func(any, []any) any { return float64(0) })
		d.props["getTime"] = newFunc(func(any, []any) any { return float64(time.Now().UnixMilli()) })
		return d
	}
	g.props["Object"] = objectCtor
	g.props["Array"] = arrayCtor
	g.props["Uint8Array"] = bytesCtor
	g.props["Date"] = dateCtor
	g.props["fs"] = h.fsObject()
	g.props["process"] = h.processObject()
	path := newObject()
	path.props["resolve"] = newFunc(func(_ any, args []any) any { return toString(arg(args, len(args)-1)) })
	g.props["path"] = path
	crypto := newObject()
	crypto.props["getRandomValues"] = newFunc(func(_ any, args []any) any {
		if b, ok := arg(args, 0).(*jsBytes); ok {
			_, _ = rand.Read(b.b)
		}
		return arg(args, 0)
	})
	g.props["crypto"] = crypto
	perf := newObject()
	perf.props["now"] = newFunc(func(any, []any) any { return float64(time.Since(h.start).Microseconds()) / 1000 })
	g.props["performance"] = perf
}

// callback calls the Node-style callback that is the last argument.
func (h *jsHost) callback(args []any, vals ...any) any {
	if cb, ok := arg(args, len(args)-1).(*jsObject); ok && cb.call != nil {
		cb.call(undefined, vals)
	}
	return undefined
}

func num(v any) int64 {
	f, _ := v.(float64)
	return int64(f)
}

func (h *jsHost) fsObject() *jsObject {
	fs := newObject()
	consts := newObject()
	for k, v := range map[string]int{"O_WRONLY": nodeWRONLY, "O_RDWR": nodeRDWR, "O_CREAT": nodeCREAT,
		"O_TRUNC": nodeTRUNC, "O_APPEND": nodeAPPEND, "O_EXCL": nodeEXCL, "O_DIRECTORY": nodeDIRECTORY} {
		consts.props[k] = float64(v)
	}
	fs.props["constants"] = consts
	fail := func(code string) *jsObject {
		return newFunc(func(_ any, args []any) any { return h.callback(args, errorValue(code)) })
	}
	// Every path names nothing: an empty file system.
	for _, name := range []string{"open", "stat", "lstat", "readdir", "readlink", "mkdir", "unlink", "rmdir",
		"rename", "chmod", "chown", "lchown", "utimes", "truncate", "link", "symlink"} {
		fs.props[name] = fail("ENOENT")
	}
	for _, name := range []string{"fchmod", "fchown", "ftruncate"} {
		fs.props[name] = fail("EBADF")
	}
	fs.props["close"] = newFunc(func(_ any, args []any) any { return h.callback(args, nil) })
	fs.props["fsync"] = newFunc(func(_ any, args []any) any { return h.callback(args, nil) })
	fs.props["fstat"] = newFunc(func(_ any, args []any) any {
		fd := num(arg(args, 0))
		if fd < 0 || fd > 2 {
			return h.callback(args, errorValue("EBADF"))
		}
		return h.callback(args, nil, h.stdioStat())
	})
	fs.props["writeSync"] = newFunc(func(_ any, args []any) any {
		b, ok := arg(args, 1).(*jsBytes)
		if !ok {
			throwError("EINVAL", "EINVAL")
		}
		n := h.writeFD(num(arg(args, 0)), b.b)
		if n < 0 {
			throwError("EBADF", "EBADF")
		}
		return float64(n)
	})
	// write(fd, buf, offset, length, position, callback)
	fs.props["write"] = newFunc(func(_ any, args []any) any {
		b, ok := arg(args, 1).(*jsBytes)
		off, n := num(arg(args, 2)), num(arg(args, 3))
		if !ok || off < 0 || n < 0 || off+n > int64(len(b.b)) {
			return h.callback(args, errorValue("EINVAL"))
		}
		if _, positioned := arg(args, 4).(float64); positioned {
			return h.callback(args, errorValue("ESPIPE"))
		}
		w := h.writeFD(num(arg(args, 0)), b.b[off:off+n])
		if w < 0 {
			return h.callback(args, errorValue("EBADF"))
		}
		return h.callback(args, nil, float64(w))
	})
	// read(fd, buf, offset, length, position, callback): stdin only.
	fs.props["read"] = newFunc(func(_ any, args []any) any {
		b, ok := arg(args, 1).(*jsBytes)
		off, n := num(arg(args, 2)), num(arg(args, 3))
		if !ok || off < 0 || n < 0 || off+n > int64(len(b.b)) {
			return h.callback(args, errorValue("EINVAL"))
		}
		if num(arg(args, 0)) != 0 {
			return h.callback(args, errorValue("EBADF"))
		}
		if _, positioned := arg(args, 4).(float64); positioned {
			return h.callback(args, errorValue("ESPIPE"))
		}
		got, err := h.stdin.Read(b.b[off : off+n])
		if err != nil && err != io.EOF {
			return h.callback(args, errorValue("EIO"))
		}
		return h.callback(args, nil, float64(got))
	})
	return fs
}

// stdioStat describes stdin, stdout and stderr: pipes owned by nobody.
func (h *jsHost) stdioStat() *jsObject {
	st := newObject()
	for k, v := range map[string]float64{"dev": 0, "ino": 0, "mode": 0o010600, "nlink": 1, "uid": 0, "gid": 0,
		"rdev": 0, "size": 0, "blksize": 4096, "blocks": 0, "atimeMs": 0, "mtimeMs": 0, "ctimeMs": 0} {
		st.props[k] = v
	}
	st.props["isDirectory"] = newFunc(func(any, []any) any { return false })
	return st
}

func (h *jsHost) processObject() *jsObject {
	p := newObject()
	minusOne := newFunc(func(any, []any) any { return float64(-1) })
	for _, name := range []string{"getuid", "getgid", "geteuid", "getegid"} {
		p.props[name] = minusOne
	}
	p.props["pid"], p.props["ppid"] = float64(-1), float64(-1)
	p.props["cwd"] = newFunc(func(any, []any) any { return "/" })
	for _, name := range []string{"getgroups", "umask", "chdir"} {
		p.props[name] = newFunc(func(any, []any) any { throwError("ENOSYS", "not implemented"); return nil })
	}
	return p
}
