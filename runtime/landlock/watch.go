package landlock

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kptr-dev/kptr/runtime"
)

// The landlock tier has no cgroup and no tmpfs of its own: what bounds a
// run's memory and scratch space is the rlimits its confiner sets
// (RLIMIT_DATA at Limits.Memory per process, RLIMIT_FSIZE at Limits.TmpSize
// per file) and this watchdog, which kptr runs beside each run. Every
// watchInterval it sums the resident memory of the run's processes (the
// launcher's descendants: the launcher is their subreaper, none can leave
// its tree) and what the run directory holds, with the files the run
// deleted but holds open (a deleted file keeps its blocks while a
// descriptor holds it: invisible to a walk of the directory); the first
// bound crossed ends the run (every process of it killed, its directory
// removed) with runtime.ErrMemoryLimit or runtime.ErrDiskLimit. It polls,
// so a run can overshoot a bound by what it allocates or writes in one
// interval (memInterval for memory, watchInterval for the directory)
// before it is ended. What a run could hold where these sums do not see it
// is refused by its seccomp filter instead (System V IPC, POSIX message
// queues, memfds, shared anonymous memory: seccomp.Policy.NoSharedMemory),
// or counted as over the bound when the watchdog cannot read it (a
// directory it cannot open, a tree nested deeper than maxDirDepth, a
// process whose descriptors it may not list; clearing the dumpable flag,
// which makes them root's, is refused: seccomp.Policy.Inspectable). Not
// counted: a file of the run directory deleted while the run keeps it only
// mapped (no descriptor left): the deploy variants' emptyDir sizeLimit
// bounds the volume in the end.

// watchInterval is the pace of the run directory's walk; a walk that takes
// longer slows it down (it takes at most a fifth of one core). Memory,
// cheap to read (a few /proc files per process), is read every
// memInterval, so a run overshoots its memory bound by at most what it
// allocates in that time.
const (
	watchInterval = 50 * time.Millisecond
	memInterval   = 10 * time.Millisecond
)

// runDirEntries bounds the files and directories a run directory may hold
// (each costs the host an inode; a tmpfs would bound them too).
const runDirEntries = 1 << 16

// runDirBytes is the landlock tier's bound on what a run directory holds in
// total: $HOME and $TMPDIR, like the namespace tier's two tmpfs of
// Limits.TmpSize each.
func runDirBytes(l runtime.Limits) int64 {
	if l.TmpSize > 0 {
		return 2 * l.TmpSize
	}
	return 2 * runtime.DefaultLimits.TmpSize
}

// watchRun polls the run of launcher (its pid) and runDir until done is
// closed, and calls stop once with the cause when the run crossed a bound:
// memLimit bytes of resident memory (0: unbounded), diskLimit bytes or
// runDirEntries entries in runDir.
func watchRun(done <-chan struct{}, launcher int, runDir string, memLimit, diskLimit int64, stop func(error)) {
	t := time.NewTimer(memInterval)
	defer t.Stop()
	nextWalk := time.Now().Add(watchInterval)
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		procs := runTree(launcher)
		if memLimit > 0 {
			var rss int64
			for _, p := range procs {
				rss += privateRSS(p)
			}
			if rss > memLimit {
				stop(fmt.Errorf("%w: its %d processes held %d MiB, more than %d MiB", runtime.ErrMemoryLimit, len(procs), rss>>20, memLimit>>20))
				return
			}
		}
		if diskLimit > 0 && !time.Now().Before(nextWalk) {
			start := time.Now()
			used, entries, err := dirUsage(runDir, runDirEntries+1)
			if err == nil {
				var open int64
				open, err = deletedOpen(procs)
				used += open
			}
			switch {
			case err != nil:
				stop(fmt.Errorf("%w: %v, counted as over the bound", runtime.ErrDiskLimit, err))
				return
			case entries > runDirEntries:
				stop(fmt.Errorf("%w: its run directory ($HOME, $TMPDIR) holds more than %d files", runtime.ErrDiskLimit, runDirEntries))
				return
			case used > diskLimit:
				stop(fmt.Errorf("%w: its run directory ($HOME, $TMPDIR) and the deleted files it holds open take %d MiB, more than %d MiB", runtime.ErrDiskLimit, used>>20, diskLimit>>20))
				return
			}
			nextWalk = time.Now().Add(max(watchInterval, 4*time.Since(start)))
		}
		t.Reset(memInterval)
	}
}

// maxTree bounds the processes treeMemory visits (the run's RLIMIT_NPROC
// bounds them first).
const maxTree = 1 << 14

// runTree lists pid's descendants. Children are found per thread (a
// process's children are listed under the thread that forked them).
func runTree(pid int) []int {
	var out []int
	queue := []int{pid}
	for len(queue) > 0 && len(out) < maxTree {
		p := queue[0]
		queue = queue[1:]
		if p != pid {
			out = append(out, p)
		}
		tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(p) + "/task")
		for _, task := range tasks {
			b, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/task/" + task.Name() + "/children")
			if err != nil {
				continue
			}
			for _, f := range bytes.Fields(b) {
				if c, err := strconv.Atoi(string(f)); err == nil {
					queue = append(queue, c)
				}
			}
		}
	}
	return out
}

// deletedOpen is the space taken by regular files without a name (deleted,
// or made with O_TMPFILE) that procs hold open, each file counted once. A
// process whose descriptors kptr may not read (one that made itself
// non-dumpable: the landlock tier's filter refuses that) is an
// *errUncountable.
func deletedOpen(procs []int) (int64, error) {
	type fileID struct{ dev, ino uint64 }
	seen := map[fileID]bool{}
	var used int64
	for _, p := range procs {
		dir := "/proc/" + strconv.Itoa(p) + "/fd"
		fds, err := os.ReadDir(dir)
		if errors.Is(err, os.ErrPermission) && hasMemory(p) {
			return used, &errUncountable{fmt.Sprintf("cannot read the descriptors of its process %d: %v", p, err)}
		}
		for _, fd := range fds {
			var st unix.Stat_t
			if unix.Stat(dir+"/"+fd.Name(), &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Nlink != 0 {
				continue
			}
			if id := (fileID{st.Dev, st.Ino}); !seen[id] {
				seen[id] = true
				used += st.Blocks * 512
			}
		}
	}
	return used, nil
}

// hasMemory says whether pid still has its address space: an exiting
// process (a zombie until it is reaped) has none, and its /proc/<pid>/fd
// is then root's whatever its dumpable flag, with no descriptor left to
// count (its status shows no Vm lines).
func hasMemory(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	return err == nil && bytes.Contains(b, []byte("\nVmSize:"))
}

// privateRSS is RssAnon + RssShmem of /proc/<pid>/status, in bytes.
func privateRSS(pid int) int64 {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	var sum int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Bytes()
		for _, key := range [][]byte{[]byte("RssAnon:"), []byte("RssShmem:")} {
			if v, ok := bytes.CutPrefix(line, key); ok {
				fs := bytes.Fields(v)
				if len(fs) > 0 {
					kb, _ := strconv.ParseInt(string(fs[0]), 10, 64)
					sum += kb << 10
				}
			}
		}
	}
	return sum
}

// maxDirDepth bounds how deep dirUsage descends: it holds one descriptor
// per level, and no function nests its scratch space this deep. A deeper
// tree is not walked but counted as over the bound.
const maxDirDepth = 512

// errUncountable is a part of the run kptr could not count: counted as
// over the disk bound, never skipped.
type errUncountable struct{ what string }

func (e *errUncountable) Error() string { return e.what }

// dirUsage is the space dir's tree takes on disk (allocated blocks, so a
// sparse file costs what it holds) and how many entries it has, counting
// no further than maxEntries. It walks relative to directory descriptors
// (openat, fstatat), so that a tree whose full paths exceed PATH_MAX is
// counted too, and follows no link. A directory the run made unreadable to
// its own uid (kptr unprivileged: the same uid) is made readable again; a
// directory it still cannot read, or one nested deeper than maxDirDepth,
// is an *errUncountable: the caller counts the run as over its bound. An
// entry removed while it is walked is not counted.
func dirUsage(dir string, maxEntries int) (int64, int, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, 0, &errUncountable{fmt.Sprintf("cannot read its run directory: %v", err)}
	}
	w := dirWalk{max: maxEntries}
	w.walk(fd, ".", 0)
	return w.used, w.entries, w.err
}

// dirWalk is one dirUsage walk.
type dirWalk struct {
	max, entries int
	used         int64
	err          error
}

// walk counts the directory open at fd (path is its name below the run
// directory, for errors) and closes fd.
func (w *dirWalk) walk(fd int, path string, depth int) {
	d := os.NewFile(uintptr(fd), path)
	defer d.Close()
	for w.err == nil && w.entries < w.max {
		names, err := d.Readdirnames(1024)
		if err != nil {
			if err != io.EOF {
				w.err = &errUncountable{fmt.Sprintf("cannot list %s: %v", path, err)}
			}
			return
		}
		for _, name := range names {
			if w.err != nil || w.entries >= w.max {
				return
			}
			w.entries++
			var st unix.Stat_t
			if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				continue // removed since it was listed
			}
			w.used += st.Blocks * 512
			if st.Mode&unix.S_IFMT != unix.S_IFDIR {
				continue
			}
			sub := path + "/" + name
			if depth+1 >= maxDirDepth {
				w.err = &errUncountable{fmt.Sprintf("directories nested more than %d deep", maxDirDepth)}
				return
			}
			cfd, err := openDirAt(fd, name)
			switch {
			case errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP):
				// removed or replaced since it was listed
			case err != nil:
				w.err = &errUncountable{fmt.Sprintf("cannot read %s: %v", sub, err)}
			default:
				w.walk(cfd, sub, depth+1)
			}
		}
	}
}

// openDirAt opens the directory name of the directory at fd for reading
// without following a link, making it readable first when the run took
// that away (chmod through an O_PATH descriptor of that very directory:
// never a path the run could redirect).
func openDirAt(fd int, name string) (int, error) {
	pfd, err := unix.Openat(fd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(pfd)
	cfd, err := unix.Openat(pfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.EACCES) && unix.Fchmodat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(pfd), 0o700, 0) == nil {
		cfd, err = unix.Openat(pfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	}
	return cfd, err
}
