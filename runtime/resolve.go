package runtime

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"

	securejoin "github.com/cyphar/filepath-securejoin"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// defaultPath is what Docker puts in PATH when the image sets none.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// nobody is the uid/gid kpt runs functions as (docker run --user nobody).
const Nobody = 65534

// process is what runs inside the sandbox, resolved from an image config the
// way Docker resolves it.
type Process struct {
	Args []string // Args[0] is an absolute path inside the rootfs
	Env  []string
	Cwd  string
	UID  int
	GID  int
	Home string // $HOME as the function sees it
}

// MergeEnv returns base with extra applied; a later KEY wins and keeps the
// position of the first occurrence. Entries without '=' are dropped.
func MergeEnv(base, extra []string) []string {
	out := make([]string, 0, len(base)+len(extra))
	idx := map[string]int{}
	for _, kv := range append(append([]string(nil), base...), extra...) {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			continue
		}
		if i, seen := idx[k]; seen {
			out[i] = kv
			continue
		}
		idx[k] = len(out)
		out = append(out, kv)
	}
	return out
}

func getenv(env []string, key string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}

// ResolveProcess applies Docker's rules for Entrypoint, Cmd, Env, WorkingDir
// and User to an image config whose root filesystem is rootfs. Every lookup
// inside rootfs resolves symlinks as if rootfs were the root, so a hostile
// image cannot make kptr stat or read a host file. rangedIDs says whether
// uids other than 0 are mapped (else everything runs as container root).
func ResolveProcess(rootfs string, cfg v1.Config, inv Invocation, rangedIDs bool) (Process, error) {
	var p Process
	args := append(append([]string(nil), cfg.Entrypoint...), cfg.Cmd...)
	if len(args) == 0 || args[0] == "" {
		return p, errors.New("image has neither Entrypoint nor Cmd")
	}
	p.Env = MergeEnv(cfg.Env, inv.Env)
	if _, ok := getenv(p.Env, "PATH"); !ok {
		p.Env = append([]string{"PATH=" + DefaultPath}, p.Env...)
	}
	p.Cwd = cfg.WorkingDir
	if p.Cwd == "" {
		p.Cwd = "/"
	}
	if !path.IsAbs(p.Cwd) {
		return p, fmt.Errorf("WorkingDir %q is not absolute", cfg.WorkingDir)
	}
	p.Cwd = path.Clean(p.Cwd)
	if fi, err := StatIn(rootfs, p.Cwd); err != nil || !fi.IsDir() {
		return p, fmt.Errorf("WorkingDir %s is not a directory in the image", p.Cwd)
	}

	exe, err := lookPathIn(rootfs, args[0], p.Cwd, p.Env)
	if err != nil {
		return p, err
	}
	args[0] = exe
	p.Args = args

	spec := cfg.User
	switch {
	case inv.AsCurrentUser:
		spec = "0"
	case spec == "":
		spec = strconv.Itoa(Nobody) // kpt runs functions as nobody
	}
	u, err := lookupUser(rootfs, spec)
	if err != nil {
		return p, err
	}
	if rangedIDs {
		p.UID, p.GID = u.uid, u.gid
	} // else only container root is mapped (to the invoking uid): run as it.
	home, ok := getenv(p.Env, "HOME")
	if !ok {
		home = u.home
		if home == "" || !path.IsAbs(home) {
			home = "/"
		}
		p.Env = append(p.Env, "HOME="+home)
	}
	p.Home = path.Clean(home)
	return p, nil
}

func StatIn(rootfs, p string) (fs.FileInfo, error) {
	full, err := securejoin.SecureJoin(rootfs, p)
	if err != nil {
		return nil, err
	}
	return os.Stat(full)
}

func IsExecutable(fi fs.FileInfo) bool {
	return fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// ErrNoEntrypoint and ErrNotExecutable classify an image whose entrypoint
// cannot start (errors.Is): not in the image, or not an executable file.
// docker run reports them as exit codes 127 and 126; kptr's docker face
// does the same.
var (
	ErrNoEntrypoint  = errors.New("entrypoint not found in the image")
	ErrNotExecutable = errors.New("entrypoint is not an executable file")
)

// entrypointError keeps its message and is one of the two errors above.
type entrypointError struct {
	msg  string
	kind error
}

func (e *entrypointError) Error() string        { return e.msg }
func (e *entrypointError) Is(target error) bool { return target == e.kind }

// lookPathIn finds name as exec(3)'s PATH search would inside rootfs and
// returns the absolute path inside the image.
func lookPathIn(rootfs, name, cwd string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		p := name
		if !path.IsAbs(p) {
			p = path.Join(cwd, p)
		}
		fi, err := StatIn(rootfs, p)
		if err != nil {
			return "", &entrypointError{fmt.Sprintf("entrypoint %s not found in the image", name), ErrNoEntrypoint}
		}
		if !IsExecutable(fi) {
			return "", &entrypointError{fmt.Sprintf("entrypoint %s is not an executable file", name), ErrNotExecutable}
		}
		return path.Clean(p), nil
	}
	pathEnv, _ := getenv(env, "PATH")
	for _, dir := range strings.Split(pathEnv, ":") {
		if dir == "" || !path.IsAbs(dir) {
			continue // relative PATH entries would depend on cwd; Docker skips them too
		}
		p := path.Join(dir, name)
		if fi, err := StatIn(rootfs, p); err == nil && IsExecutable(fi) {
			return p, nil
		}
	}
	return "", &entrypointError{fmt.Sprintf("entrypoint %q not found on the image's PATH (%s)", name, pathEnv), ErrNoEntrypoint}
}

type user struct {
	uid, gid int
	home     string
}

// lookupUser resolves Docker's User forms: "", "uid", "uid:gid", "name",
// "name:group" against the image's /etc/passwd and /etc/group.
func lookupUser(rootfs, spec string) (user, error) {
	u := user{uid: 0, gid: 0, home: "/root"}
	if spec == "" {
		return u, nil
	}
	name, group, hasGroup := strings.Cut(spec, ":")
	passwd := readColonFile(rootfs, "/etc/passwd")
	if n, err := strconv.Atoi(name); err == nil && n >= 0 {
		u = user{uid: n, gid: n, home: "/"}
		for _, f := range passwd {
			if len(f) >= 6 && f[2] == name {
				u.gid, _ = strconv.Atoi(f[3])
				u.home = f[5]
				break
			}
		}
	} else {
		found := false
		for _, f := range passwd {
			if len(f) >= 6 && f[0] == name {
				uid, err1 := strconv.Atoi(f[2])
				gid, err2 := strconv.Atoi(f[3])
				if err1 != nil || err2 != nil {
					break
				}
				u = user{uid: uid, gid: gid, home: f[5]}
				found = true
				break
			}
		}
		if !found {
			return u, fmt.Errorf("user %q not found in the image's /etc/passwd", name)
		}
	}
	if hasGroup {
		if n, err := strconv.Atoi(group); err == nil && n >= 0 {
			u.gid = n
		} else {
			found := false
			for _, f := range readColonFile(rootfs, "/etc/group") {
				if len(f) >= 3 && f[0] == group {
					if gid, err := strconv.Atoi(f[2]); err == nil {
						u.gid, found = gid, true
					}
					break
				}
			}
			if !found {
				return u, fmt.Errorf("group %q not found in the image's /etc/group", group)
			}
		}
	}
	return u, nil
}

// readColonFile reads a passwd-style file inside rootfs (at most 1 MiB).
func readColonFile(rootfs, p string) [][]string {
	full, err := securejoin.SecureJoin(rootfs, p)
	if err != nil {
		return nil
	}
	f, err := os.Open(full)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out [][]string
	sc := bufio.NewScanner(&limitedReader{f, 1 << 20})
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out = append(out, strings.Split(line, ":"))
	}
	return out
}

type limitedReader struct {
	f *os.File
	n int64
}

func (l *limitedReader) Read(b []byte) (int, error) {
	if l.n <= 0 {
		return 0, errors.New("file too large")
	}
	if int64(len(b)) > l.n {
		b = b[:l.n]
	}
	n, err := l.f.Read(b)
	l.n -= int64(n)
	return n, err
}
