// The landlock tier's launcher and confiner (package runtime's Landlock): a
// constructor that runs before the Go runtime in a process started by
// nsinit.StartLandlock (argv[1] == "__kptr_landlock" and _KPTR_LANDLOCK
// naming the spec descriptor). In every other process it returns at once
// and touches nothing. Two processes, where the landlock tier used to start
// two Go copies of kptr:
//
//	kptr ── launcher (this constructor) ──clone(CLONE_VM|CLONE_VFORK)── confiner ─execve→ function
//
// The launcher is a child subreaper: every process the function starts, also
// one that double-forks or calls setsid, stays its descendant or is
// reparented to it, so when the function's main process exits, or kptr asks
// (SIGTERM: timeout, output cap, cancellation) or dies (parent-death
// signal), it SIGKILLs its children until it has none left and exits as the
// function did (128+signal for one killed by a signal). The confiner shares
// the launcher's memory and runs while the launcher waits (CLONE_VFORK,
// as posix_spawn does): in a new session it lowers the rlimits, sets
// oom_score_adj, the umask and the working directory, becomes the
// function's uid when kptr is root (bounding set emptied first), re-arms the
// parent-death signal, sets no_new_privs, adds the files of its own
// /proc/<pid> that language runtimes read (kptr names them) to the Landlock
// ruleset kptr built and passed (the rest of the policy), restricts itself
// with it, loads kptr's seccomp program and executes the function.
//
// Descriptors: the spec (N, from _KPTR_LANDLOCK), the status pipe (N+1) and
// the ruleset (N+2). The confiner writes why the function could not be
// started on the status pipe and exits 127; EOF without a word: it started.
// The spec is kptr's own (the image only shaped the paths in it); the
// parser is bounded all the same.
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/landlock.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nsinit.h"
#include "wire.h"

struct llspec {
	uint32_t parent;
	int32_t uid, gid; // -1: keep kptr's
	uint64_t nofile, fsize, nproc, data; // 0: unchanged
	const char *dir, *path;
	uint32_t nargs, nenv, nfilter, nproc_files;
	char **args, **env;
	const char **proc_files; // names in its own /proc/<pid> it may read
	struct sock_filter *filter;
};

static int specfd = -1, statusfd = -1, rulesetfd = -1;

// fail writes "step target: error" on the status pipe and exits 127 (the
// function was not started).
static void __attribute__((noreturn)) fail(int err, const char *step, const char *target)
{
	char buf[NSINIT_MSG_MAX];
	int n = snprintf(buf, sizeof(buf), "%s%s%s: %s", step, target ? " " : "", target ? target : "", strerror(err));
	if (n > (int)sizeof(buf) - 1)
		n = sizeof(buf) - 1;
	if (n > 0 && write(statusfd, buf, (size_t)n) < 0) {
		// nobody to tell
	}
	_exit(127);
}

static void parse(const char *buf, size_t len, struct llspec *s)
{
	struct cur c = {buf, buf + len};

	s->parent = u32(&c);
	s->uid = (int32_t)u32(&c);
	s->gid = (int32_t)u32(&c);
	s->nofile = u64(&c);
	s->fsize = u64(&c);
	s->nproc = u64(&c);
	s->data = u64(&c);
	s->proc_files = strs(&c, &s->nproc_files, "proc file count");
	for (uint32_t i = 0; i < s->nproc_files; i++)
		if (s->proc_files[i][0] == 0 || s->proc_files[i][0] == '.' || strchr(s->proc_files[i], '/') != NULL)
			bad("proc file not a plain name");
	s->dir = str(&c);
	s->path = str(&c);
	if (s->dir[0] != '/' || s->path[0] != '/')
		bad("paths not absolute");
	s->args = (char **)strs(&c, &s->nargs, "arg count");
	if (s->nargs == 0)
		bad("no args");
	s->env = (char **)strs(&c, &s->nenv, "env count");
	s->filter = bpf_last(&c, &s->nfilter);
	if (s->nfilter == 0)
		bad("no seccomp program"); // the tier's promises rest on it
}

// lower sets both limits of res to at most v (an unprivileged process can
// only lower them).
static void lower(int res, uint64_t v, const char *what)
{
	struct rlimit l;
	if (getrlimit(res, &l) < 0)
		fail(errno, "getrlimit", what);
	if (l.rlim_cur > v)
		l.rlim_cur = v;
	if (l.rlim_max > v)
		l.rlim_max = v;
	if (setrlimit(res, &l) < 0)
		fail(errno, "setrlimit", what);
}

// The confiner's stack (it shares the launcher's memory until execve).
#define CONFINER_STACK (256 << 10)

static int confiner(void *arg)
{
	const struct llspec *s = arg;
	sigset_t none;
	int fd;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL); // the launcher blocks SIGCHLD and SIGTERM
	if (fcntl(statusfd, F_SETFD, FD_CLOEXEC) < 0)
		fail(errno, "fcntl", "status");
	if (setsid() < 0)
		fail(errno, "setsid", NULL);
	if (s->nofile)
		lower(RLIMIT_NOFILE, s->nofile, "nofile");
	if (s->fsize)
		lower(RLIMIT_FSIZE, s->fsize, "fsize");
	lower(RLIMIT_CORE, 0, "core");
	if (s->nproc)
		lower(RLIMIT_NPROC, s->nproc, "nproc");
	if (s->data)
		lower(RLIMIT_DATA, s->data, "data");
	// The kernel's OOM killer picks the function before the sidecar.
	fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		if (write(fd, "1000", 4) < 0) {
			// lowering needs privilege; raising never fails
		}
		close(fd);
	}
	umask(022);
	if (chdir(s->dir) < 0)
		fail(errno, "working directory", s->dir);
	if (s->uid >= 0) {
		// kptr is root: empty the bounding set, then become the function's
		// uid (which clears every other capability set).
		for (int c = 0; c <= 63; c++)
			if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL)
				fail(errno, "drop a capability from the bounding set", NULL);
		if (syscall(SYS_setgroups, 0, NULL) < 0)
			fail(errno, "setgroups", NULL);
		if (syscall(SYS_setresgid, s->gid, s->gid, s->gid) < 0)
			fail(errno, "setresgid", NULL);
		if (syscall(SYS_setresuid, s->uid, s->uid, s->uid) < 0)
			fail(errno, "setresuid", NULL);
	}
	// A credential change clears the parent-death signal: set it (again).
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		fail(errno, "parent-death signal", NULL);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		fail(errno, "no_new_privs", NULL);
	// The named files of its own /proc/<pid> (execve keeps the pid): only
	// this process knows it. Not the directory: its net/ lists the host's
	// sockets, its mountinfo the host's mounts. A file this kernel lacks is
	// skipped.
	for (uint32_t i = 0; i < s->nproc_files; i++) {
		char p[64];
		struct stat st;
		struct landlock_path_beneath_attr a = {.allowed_access = LANDLOCK_ACCESS_FS_READ_FILE};
		snprintf(p, sizeof(p), "/proc/self/%s", s->proc_files[i]);
		int pfd = open(p, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (pfd < 0 && errno == ENOENT)
			continue;
		if (pfd < 0 || fstat(pfd, &st) < 0)
			fail(errno, "landlock rule for", p);
		if (S_ISDIR(st.st_mode))
			a.allowed_access |= LANDLOCK_ACCESS_FS_READ_DIR; // fd/: its own descriptors
		a.parent_fd = pfd;
		if (syscall(SYS_landlock_add_rule, rulesetfd, LANDLOCK_RULE_PATH_BENEATH, &a, 0) < 0)
			fail(errno, "landlock rule for", p);
		close(pfd);
	}
	if (syscall(SYS_landlock_restrict_self, rulesetfd, 0) < 0)
		fail(errno, "landlock_restrict_self", NULL);
	close(rulesetfd);
	struct sock_fprog prog = {.len = s->nfilter, .filter = s->filter};
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
		fail(errno, "seccomp", NULL);
	execve(s->path, s->args, s->env);
	fail(errno, "exec", s->args[0]);
}

// children lists up to max children of this process into pids, from its
// thread's children file (the launcher is single-threaded), else by the
// parent field of every /proc/*/stat. It runs once the confiner has executed
// the function (or exited): the launcher's memory is its own again.
static int children(pid_t *pids, int max)
{
	char p[64], buf[8192];
	int n = 0, fd;
	ssize_t r;

	snprintf(p, sizeof(p), "/proc/self/task/%d/children", (int)getpid());
	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		r = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (r >= 0) {
			char *s = buf, *e;
			buf[r] = 0;
			while (n < max) {
				long v = strtol(s, &e, 10);
				if (e == s)
					break;
				pids[n++] = (pid_t)v;
				s = e;
			}
			return n;
		}
	}
	// A kernel without CONFIG_PROC_CHILDREN: the parent field of every
	// process ("pid (comm) state ppid ...", comm may hold anything).
	DIR *d = opendir("/proc");
	struct dirent *de;
	if (d == NULL)
		return 0;
	while (n < max && (de = readdir(d)) != NULL) {
		char *e, *rp;
		long pid = strtol(de->d_name, &e, 10), ppid;
		if (*e != 0 || pid <= 0)
			continue;
		snprintf(p, sizeof(p), "/proc/%ld/stat", pid);
		fd = open(p, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		r = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (r <= 0)
			continue;
		buf[r] = 0;
		rp = strrchr(buf, ')');
		if (rp == NULL || sscanf(rp + 1, " %*c %ld", &ppid) != 1)
			continue;
		if (ppid == (long)getpid())
			pids[n++] = (pid_t)pid;
	}
	closedir(d);
	return n;
}

// end kills every child until none is left and returns the main one's wait
// status (or -1 if it was not reaped before).
static int end(pid_t main, int status)
{
	pid_t pids[512];
	for (;;) {
		int st, n = children(pids, 512);
		pid_t r;
		for (int i = 0; i < n; i++)
			kill(pids[i], SIGKILL);
		r = waitpid(-1, &st, __WALL);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return status; // ECHILD: none left
		if (r == main)
			status = st;
	}
}

static void launcher(void)
{
	static struct llspec spec;
	uint32_t len;
	char *buf, *stack;
	sigset_t set;
	pid_t main;
	int st = -1, null;

	if (fcntl(specfd, F_SETFD, FD_CLOEXEC) < 0 || fcntl(rulesetfd, F_SETFD, FD_CLOEXEC) < 0)
		fail(errno, "fcntl", NULL);
	buf = read_spec(specfd, LLINIT_MAGIC, &len);
	parse(buf, len, &spec);
	close(specfd);
	if (syscall(SYS_close_range, rulesetfd + 1, ~0U, 0) < 0)
		fail(errno, "close_range", NULL);

	if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
		fail(errno, "subreaper", NULL);
	// kptr gone (SIGKILL at Argo CD's deadline): end the run as if timed out.
	if (prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0) < 0)
		fail(errno, "parent-death signal", NULL);
	// kptr passes its pid: it may be pid 1 (a container's entrypoint), so
	// "reparented to init" is not the test of its death.
	if ((uint32_t)getppid() != spec.parent)
		fail(ESRCH, "kptr exited before the launcher started", NULL);
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
		fail(errno, "sigprocmask", NULL);
	stack = mmap(NULL, CONFINER_STACK + 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (stack == MAP_FAILED)
		fail(errno, "mmap", "stack");
	if (mprotect(stack, 4096, PROT_NONE) < 0)
		fail(errno, "mprotect", "stack guard");
	// CLONE_VFORK: this process waits until the confiner has executed the
	// function or exited; nothing else runs in the memory they share.
	main = clone(confiner, stack + CONFINER_STACK + 4096, CLONE_VM | CLONE_VFORK | SIGCHLD, &spec);
	if (main < 0)
		fail(errno, "clone", NULL);
	close(rulesetfd);
	// The launcher holds none of the function's pipes: a function that does
	// not read stdin must give kptr EPIPE, and output ends with the run.
	null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null >= 0) {
		for (int fd = 0; fd < 3; fd++)
			dup2(null, fd);
		close(null);
	}
	close(statusfd);
	for (;;) {
		siginfo_t si;
		if (sigwaitinfo(&set, &si) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (si.si_signo == SIGTERM)
			break;
		// SIGCHLD: reap what has ended; the main process's end ends the run.
		for (;;) {
			int ws;
			pid_t r = waitpid(-1, &ws, WNOHANG | __WALL);
			if (r <= 0)
				break;
			if (r == main) {
				st = ws;
				goto done;
			}
		}
	}
done:
	st = end(main, st);
	if (st == -1)
		_exit(128 + SIGKILL);
	if (WIFSIGNALED(st))
		_exit(128 + WTERMSIG(st));
	_exit(WEXITSTATUS(st));
}

// landlock_ctor is the whole launcher when the process is one (argv[1] and
// the environment's spec descriptor); in any other process it returns
// without a system call.
__attribute__((constructor)) static void landlock_ctor(int argc, char **argv, char **envp)
{
	int fd = ctor_fd(argc, argv, envp, LLINIT_ARG, LLINIT_ENV "=");

	if (fd < 0)
		return;
	specfd = fd;
	statusfd = fd + 1;
	rulesetfd = fd + 2;
	launcher();
	_exit(125); // not reached
}
