package runtime

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// A probe's verdict is cached in the run-state directory (DefaultStateDir:
// $XDG_RUNTIME_DIR/kptr or $TMPDIR/kptr-run-<uid>, private to the user, see
// EnsurePrivateDir), one file per tier and kptr build, so that a kptr process does not
// start probe children in throw-away namespaces every time (about a third
// of a trivial `kptr fn eval`). A verdict is used only while its key still
// describes the process: VerdictKeyNow reads, cheaply (no child, no
// namespace), everything a probe's outcome depends on that can change
// without the verdict file going away with it:
//
//   - the kernel (release, version string, boot id) and the sysctls that
//     gate user namespaces;
//   - the kptr build (Go build ID: probe code and policy) and the
//     verdict format;
//   - the process's identity and confinement: euid, egid, uid and gid maps,
//     capabilities, no_new_privs, seccomp mode and filter count, the LSM
//     label, its namespaces and cgroup (a new pod, another securityContext,
//     another seccomp or AppArmor profile all change one of them);
//   - the state directory (path, device and inode: the overlay probe's
//     outcome depends on its file system) and, as root, the first directory
//     above it that the uids functions run as cannot traverse (a chmod of
//     $TMPDIR changes whether runs can start; see StateDirFor).
//
// What a key cannot see (a seccomp profile replaced by one with as many
// filters, a kernel module unloaded) is caught when a run fails to start:
// the sandbox then probes again and replaces the verdict (Sandbox.recheck).
//
// The file is trusted only if it is a regular file owned by the effective
// uid that nobody else may read or write, opened without following a
// symlink, below the user's own state directory, and no larger than
// maxVerdictSize; anything else (corrupt, foreign, another key) is ignored
// and the environment probed afresh, which then replaces it. Only verdicts
// that let the tier run are kept (KeepVerdict). Writes go to a
// temporary name and are renamed into place, so concurrent kptr processes
// read either the old verdict or the new one.

// verdictFormat changes whenever what a verdict file holds, or what the
// probes decide, changes in a way a build ID would not show.
const verdictFormat = 2

const MaxVerdictSize = 256 << 10

// VerdictKey is what a verdict depends on; see the comment above.
type VerdictKey struct {
	Format   int
	Tier     string
	Kernel   string
	BootID   string
	Build    string
	EUID     int
	EGID     int
	StateDir string
	StateDev uint64
	StateIno uint64
	// StateGate is, as root, the first directory above the state directory
	// the uids functions run as cannot traverse ("" when they can).
	StateGate string `json:",omitempty"`
	Context   string
	// Extra is what else the tier's probes depend on (the landlock
	// tier: the kernel's Landlock ABI).
	Extra string `json:",omitempty"`
}

// Verdict is one cached probe outcome.
type Verdict struct {
	Key     VerdictKey
	Results []ProbeResult
	// Tier is what else the tier keeps with its verdict (the namespace
	// tier: the features it adapts to).
	Tier json.RawMessage `json:",omitempty"`
}

// verdictName is the file of tier's verdict for this kptr build: each build
// keeps its own, so that two builds run by one user (an upgrade rolling
// out, a benchmark comparing two) do not replace each other's verdict and
// probe on every run.
func verdictName(tier string) string {
	sum := sha256.Sum256([]byte(GoBuildID()))
	return verdictPrefix(tier) + hex.EncodeToString(sum[:6]) + ".json"
}

func verdictPrefix(tier string) string { return "probe-verdict-" + tier + "-" }

// staleVerdictAge is how long another build's verdict stays unused before a
// store removes it (a build that still runs then probes once and stores it
// again).
const staleVerdictAge = time.Hour

// dropStaleVerdicts removes the verdicts of tier that other builds stored
// more than staleVerdictAge ago, and the single file earlier kptr versions
// kept for every build.
func dropStaleVerdicts(root *os.Root, tier string) {
	f, err := root.Open(".")
	if err != nil {
		return
	}
	names, _ := f.Readdirnames(-1)
	f.Close()
	mine := verdictName(tier)
	for _, n := range names {
		if n == "probe-verdict-"+tier+".json" {
			_ = root.Remove(n)
			continue
		}
		if n == mine || !strings.HasPrefix(n, verdictPrefix(tier)) || !strings.HasSuffix(n, ".json") {
			continue
		}
		if fi, err := root.Lstat(n); err == nil && fi.Mode().IsRegular() && time.Since(fi.ModTime()) > staleVerdictAge {
			_ = root.Remove(n)
		}
	}
}

// contextFiles are read into VerdictKey.Context: the process's
// confinement and the sysctls that gate user namespaces.
var contextFiles = []string{
	"/proc/self/uid_map", "/proc/self/gid_map", "/proc/self/attr/current", "/proc/self/cgroup",
	"/proc/sys/user/max_user_namespaces", "/proc/sys/kernel/unprivileged_userns_clone",
	"/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
}

// statusFields are the lines of /proc/self/status that describe the
// process's confinement.
var statusFields = []string{"CapEff:", "CapBnd:", "NoNewPrivs:", "Seccomp:", "Seccomp_filters:"}

// VerdictKeyNow reads the key of the current process for tier and the state
// directory dir. ok is false when something the key needs cannot be read
// (then nothing is cached).
func VerdictKeyNow(tier, dir, extra string) (VerdictKey, bool) {
	var uts unix.Utsname
	if unix.Uname(&uts) != nil {
		return VerdictKey{}, false
	}
	build := GoBuildID()
	if build == "" {
		return VerdictKey{}, false
	}
	var st unix.Stat_t
	if unix.Lstat(dir, &st) != nil {
		return VerdictKey{}, false
	}
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	var ctx strings.Builder
	for _, f := range contextFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			b = []byte("-")
		}
		fmt.Fprintf(&ctx, "%s=%s\n", f, bytes.TrimSpace(b))
	}
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			for _, f := range statusFields {
				if strings.HasPrefix(l, f) {
					ctx.WriteString(strings.Join(strings.Fields(l), " ") + "\n")
				}
			}
		}
	}
	for _, ns := range []string{"user", "mnt", "pid", "net", "ipc", "uts", "cgroup"} {
		l, _ := os.Readlink("/proc/self/ns/" + ns)
		ctx.WriteString(l + "\n")
	}
	k := VerdictKey{
		Format:   verdictFormat,
		Tier:     tier,
		Kernel:   unix.ByteSliceToString(uts.Release[:]) + " " + unix.ByteSliceToString(uts.Version[:]),
		BootID:   strings.TrimSpace(string(boot)),
		Build:    build,
		EUID:     os.Geteuid(),
		EGID:     os.Getegid(),
		StateDir: dir,
		StateDev: uint64(st.Dev),
		StateIno: st.Ino,
		Context:  ctx.String(),
		Extra:    extra,
	}
	if CanMapRange() {
		k.StateGate = Untraversable(dir)
	}
	return k, true
}

// BuildID is the Go build ID of the running kptr binary (see GoBuildID):
// what identifies a build for anything kptr caches across runs (probe
// verdicts here, cmd/kptr's whole-application memo key); "" when unknown.
func BuildID() string { return GoBuildID() }

// GoBuildID is the Go build ID of the running binary (it changes with any
// change of its code or build tags), read from its ELF note
// (.note.go.buildid: namesz 4, descsz, type 4, "Go\0\0", the ID), which the
// Go linker places in the first pages of /proc/self/exe; "" when it cannot
// be found (nothing is cached then).
var GoBuildID = sync.OnceValue(func() string {
	f, err := os.Open("/proc/self/exe")
	if err != nil {
		return ""
	}
	defer f.Close()
	head := make([]byte, 64<<10)
	n, _ := io.ReadFull(f, head)
	head = head[:n]
	i := bytes.Index(head, []byte("\x04\x00\x00\x00Go\x00\x00"))
	if i < 8 || binary.LittleEndian.Uint32(head[i-8:]) != 4 {
		return ""
	}
	size := int(binary.LittleEndian.Uint32(head[i-4:]))
	desc := head[i+8:]
	if size == 0 || size > 256 || size > len(desc) {
		return ""
	}
	return string(desc[:size])
})

// LoadVerdict returns the cached verdict for key, or false when there is
// none that may be trusted and matches key.
func LoadVerdict(key VerdictKey) (Verdict, bool) {
	root, err := os.OpenRoot(key.StateDir)
	if err != nil {
		return Verdict{}, false
	}
	defer root.Close()
	f, err := root.OpenFile(verdictName(key.Tier), os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return Verdict{}, false
	}
	defer f.Close()
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG ||
		int(st.Uid) != os.Geteuid() || st.Mode&0o077 != 0 || st.Size > MaxVerdictSize {
		return Verdict{}, false
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxVerdictSize+1))
	if err != nil || len(b) > MaxVerdictSize {
		return Verdict{}, false
	}
	var v Verdict
	if json.Unmarshal(b, &v) != nil || !reflect.DeepEqual(v.Key, key) || len(v.Results) == 0 || Required(v.Results) != nil {
		return Verdict{}, false
	}
	return v, true
}

// KeepVerdict caches v when its tier can run, and otherwise removes what is
// cached: a failed probe is never reused, since its cause may have been
// passing (namespaces or processes exhausted by concurrent runs), and
// probing again where the tier cannot run fails fast (--sandbox=auto then
// takes the landlock tier).
func KeepVerdict(v Verdict) {
	if Required(v.Results) != nil {
		dropVerdict(v.Key.Tier, v.Key.StateDir)
		return
	}
	_ = storeVerdict(v)
}

// storeVerdict replaces the cached verdict for v.Key (best effort: a verdict
// that cannot be written only costs the next process a probe).
func storeVerdict(v Verdict) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	root, err := os.OpenRoot(v.Key.StateDir)
	if err != nil {
		return err
	}
	defer root.Close()
	// Named as this process's entry: PruneStale removes it if kptr dies
	// before the rename.
	tmp := OwnerName() + "." + v.Key.Tier + ".verdict"
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(tmp, verdictName(v.Key.Tier))
	}
	if err != nil {
		_ = root.Remove(tmp)
		return fmt.Errorf("probe verdict in %s: %w", v.Key.StateDir, err)
	}
	dropStaleVerdicts(root, v.Key.Tier)
	return nil
}

// dropVerdict removes the cached verdict of tier in dir.
func dropVerdict(tier, dir string) {
	if root, err := os.OpenRoot(dir); err == nil {
		_ = root.Remove(verdictName(tier))
		root.Close()
	}
}

// verdictPath is the file a tier's verdict for dir is cached in.
func VerdictPath(tier, dir string) string { return filepath.Join(dir, verdictName(tier)) }
