// Package namespace is the namespace tier, the strong one: each run of a
// function is one libcontainer configuration (config.go) in its own user,
// mount, pid, network, ipc and uts namespaces, with the image's rootfs as
// its root, started by kptr's own C container init (runtime/launcher) or by
// runc's libcontainer where nsinit cannot start a run (launch.go says which
// and why). It holds everything of the tier: the configuration, both
// launchers, prepared sandboxes (prepare.go), the probes and their cached
// verdict (probe.go, verdict.go). Nothing outside this package imports
// libcontainer.
//
//	sb, err := namespace.New()           // probes the environment (or reuses the cached verdict); *runtime.ProbeError if a prerequisite is missing
//	res, err := sb.Run(ctx, bundle, runtime.Invocation{Stdin: rl})
//
// Guarantees of a Sandbox run:
//   - The function never holds host root or any capability: its own user
//     namespace (container root = the invoking uid when unprivileged; a
//     dedicated unprivileged uid range when kptr is root), no_new_privs,
//     empty capability sets, and kptr's seccomp filter (runtime/seccomp's
//     allow-list) in every build, whichever launcher starts the run: nsinit
//     loads it before it executes the function; in libcontainer's runs
//     runtime/containerinit loads it into every thread of the init, and
//     kptr releases the function only once it sees Seccomp: 2 in each
//     (libcontainer loads filters only through libseccomp, which kptr does
//     not link). A run that cannot be filtered is refused.
//   - It sees the bundle's rootfs and nothing else of the host; that rootfs
//     is never written (read-only binds or an overlay's lower layer; mount
//     points are never created in it). /tmp and $HOME are fresh tmpfs
//     mounts, private to the run. Where the kernel allows overlayfs in a
//     user namespace (probed once per process and state directory; see
//     WithOverlay), the image's top-level directories are a writable
//     overlay whose upper layer lives in the run's state directory and is
//     removed with the run; otherwise the image is read-only.
//   - Own pid, ipc, uts, network (loopback only unless Invocation.Network)
//     and, where available, cgroup namespaces; runc's masked and read-only
//     /proc paths; /dev with null, zero, random and urandom only.
//   - Only the image's Env plus Invocation.Env; never kptr's environment.
//   - Every run ends: Run returns within the run's timeout plus a grace of
//     a few seconds (KillGrace, plus OutputGrace for output still held
//     open), whatever the function does. The timeout, the context and the
//     output caps kill every process of the run (SIGKILL to its pid
//     namespace's init, through a pidfd), stopped and traced ones
//     included; threads that made kptr their tracer (PTRACE_TRACEME) are
//     reaped with __WALL, so a traced zombie never keeps the run, or its
//     pid namespace, alive. No wait is unbounded: what the kernel has not
//     reaped within the grace is reported in the error and left to a
//     background reaper (see reaper). Run never hangs on a function that
//     does not read stdin, floods or writes garbage.
//   - No state is left: a run removes its entries in the run-state
//     directory (libcontainer's state, its private root, its overlay upper
//     layer) when it ends, however it ends (success, failure, crash,
//     timeout, output cap, failed start). A kptr killed mid-run cannot; its
//     lock there (flock, released by the kernel when it dies) then lets
//     the next New remove its entries at once, never those of a live kptr
//     (see runtime's statedir.go).
//   - The run-state directory is private to kptr's uid (0711, never a
//     link, never another user's) and, as root, one the uids functions run
//     as can reach: a private $TMPDIR or $XDG_RUNTIME_DIR is left private
//     and another directory taken (StateDirFor); where none can be, both
//     tiers' probes fail on it with the fix, before any run.
//
// Prepare (the Preparer interface; the pipeline calls it for a render's
// first functions while the package is read, then for the next function
// while the current one runs) sets a run's sandbox up ahead, up to
// the point where the container init waits to exec the function; a later
// Run with the same bundle and an invocation of the same shape (env,
// network, mounts, user) only releases it. A prepared sandbox is used by at
// most one run, never by a run of another shape; the guarantees above hold
// unchanged (the timeout starts when the function is released). Unused ones
// are bounded (two), destroyed by Close or the end of Prepare's context, and
// die with the process (parent-death signal). Once a prepared run has ended
// normally, Run returns its result and its state (libcontainer's, the
// cgroup, the overlay's upper layer) is removed in the background; its
// processes are gone by then. A program calls Close before it exits: Close
// returns once every unused prepared sandbox and every such state is gone,
// and drops the Sandbox's hold on the run-state directory.
//
// What it cannot give: the memory limit needs cgroups delegated to kptr
// (kptr as root, or a delegated cgroup v2 subtree): elsewhere it is not
// enforced and the OOM killer picks functions first (oom_score_adj 1000).
// It needs user namespaces, mounts and namespace flags to clone: pods under
// Kubernetes' RuntimeDefault seccomp profile or containerd's AppArmor
// default, and kernels without user namespaces, cannot run it (kptr doctor
// says which probe fails and the fix); --sandbox=auto then takes the
// landlock tier.
//
// Programs that use this package must call runtime.HandleInit first thing
// in main (and import libcontainer/nsenter) so the binary can act as the
// container init, and should call ReexecSealed once so libcontainer need
// not copy the binary on every run.
package namespace
