package landlock

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
// before it is ended. Not counted: a deleted file only mapped (no descriptor
// left), and, when kptr is not root, the descriptors of a process that made
// itself non-dumpable (its /proc/<pid>/fd is root's then): the deploy
// variants' emptyDir sizeLimit bounds the volume in the end.

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
			used, entries := dirUsage(runDir, runDirEntries+1)
			used += deletedOpen(procs)
			switch {
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
// or memfd) that procs hold open, each file counted once.
func deletedOpen(procs []int) int64 {
	type fileID struct{ dev, ino uint64 }
	seen := map[fileID]bool{}
	var used int64
	for _, p := range procs {
		dir := "/proc/" + strconv.Itoa(p) + "/fd"
		fds, _ := os.ReadDir(dir)
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
	return used
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

// dirUsage is the space dir's tree takes on disk (allocated blocks, so a
// sparse file costs what it holds) and how many entries it has, counting
// no further than maxEntries. A directory the run made unreadable to its
// own uid (kptr unprivileged: the same uid) is made readable again.
func dirUsage(dir string, maxEntries int) (int64, int) {
	var used int64
	entries := 0
	var walk func(d string)
	walk = func(d string) {
		des, err := os.ReadDir(d)
		if errors.Is(err, os.ErrPermission) && os.Chmod(d, 0o700) == nil {
			des, err = os.ReadDir(d)
		}
		for _, de := range des {
			if entries >= maxEntries {
				return
			}
			entries++
			p := filepath.Join(d, de.Name())
			var st unix.Stat_t
			if unix.Lstat(p, &st) != nil {
				continue
			}
			used += st.Blocks * 512
			if st.Mode&unix.S_IFMT == unix.S_IFDIR {
				walk(p)
			}
		}
	}
	walk(dir)
	return used, entries
}
