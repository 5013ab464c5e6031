// Package landlock is the namespace-free tier: it runs a bundle's entrypoint
// as a child of kptr confined by Landlock, seccomp and rlimits, for pods whose
// seccomp profile (Kubernetes' RuntimeDefault under containerd or CRI-O),
// AppArmor profile or kernel (Bottlerocket: no user namespaces) refuses the
// namespaces the namespace tier needs. Its launcher and confiner are
// runtime/launcher's landlock.c; its seccomp program is runtime/seccomp's.
//
// Guarantees of a run (runtime/launcher's landlock.c describes the
// processes: kptr's C launcher and confiner):
//   - The function reads and executes only beneath the image's rootfs and
//     reads and writes only beneath its private run directory ($HOME and
//     $TMPDIR point there; removed after the run), plus /dev/null,
//     /dev/zero and /dev/urandom, and its main process the files runtimes
//     read of its own /proc/<pid> (procFiles); everything else of the
//     host's file system is denied by Landlock, including the rest of /proc
//     (net/, mountinfo, other processes).
//   - No host UNIX socket: socket(AF_UNIX) and datagram socketpairs fail
//     (seccomp); from Landlock ABI 9 pathname sockets outside the run are
//     denied too.
//   - No network unless Invocation.Network: socket(2) fails for every
//     family (seccomp), TCP bind and connect are denied (Landlock ABI 4,
//     Linux 6.7).
//   - Signals and abstract unix sockets are scoped to the run (Landlock ABI
//     6, Linux 6.12); on older kernels a function can signal processes of
//     kptr's uid (New's probes say so).
//   - seccomp (runtime/seccomp's allow-list, the namespace tier's policy)
//     refuses ptrace, mount and namespace calls (clone with namespace
//     flags, clone3, unshare, setns), keyrings, bpf, io_uring,
//     perf_event_open and every call it does not name; System V IPC,
//     POSIX message queues, memfd_create, memfd_secret and shared
//     anonymous mmap (the run shares kptr's ipc namespace and has no
//     memory cgroup: seccomp.Policy.NoSharedMemory) and
//     prctl(PR_SET_DUMPABLE, 0) (seccomp.Policy.Inspectable); and, when
//     the function's uid owns the cached image, the calls that change a
//     file's mode, owner, times or extended attributes (Landlock does not
//     govern them);
//     no_new_privs; a new session; oom_score_adj 1000; RLIMIT_NPROC,
//     RLIMIT_NOFILE, RLIMIT_FSIZE, RLIMIT_DATA (Limits.Memory) and
//     RLIMIT_CORE. When kptr is root the
//     function runs as host uid runtime.RootHostIDBase+its image uid, never
//     root.
//   - Only the image's Env plus Invocation.Env, with HOME and TMPDIR set to
//     the run directory.
//   - The timeout, the context and the output caps end every process of the
//     run, as does the function's main process exiting: a subreaper
//     launcher SIGKILLs and reaps them all. So does the watchdog (watch.go)
//     when the run's processes hold more than Limits.Memory or its run
//     directory more than twice Limits.TmpSize, or when it cannot count
//     part of the run (a directory it cannot read, a tree nested deeper
//     than it walks, a process whose descriptors it may not list).
//   - The run holds the owner lock of the run-state directory while its
//     directory exists: a kptr killed mid-run leaves it to the next kptr,
//     which removes it at once.
//
// With Invocation.Network the host's /etc/resolv.conf, /etc/hosts and
// /etc/nsswitch.conf are readable too (name resolution).
//
// What it cannot promise: the image is not the root, so absolute paths in
// the function resolve against the host's root (and Landlock denies them):
// a function that reads its own image's files by absolute path (or starts
// another of the image's programs by one) fails. Invocation.Mounts are
// refused. Memory and scratch space are bounded by polling, not by a cgroup
// and a tmpfs (watch.go says what a run can overshoot).
package landlock
