// The container init of package nsinit: a constructor that runs before the
// Go runtime in a process started by nsinit.Start (argv[1] == "__kptr_nsinit"
// and _KPTR_NSINIT naming the sync socket), sets the container up from the
// spec it reads on that socket, waits to be released and executes the
// function. In every other process it returns at once and touches nothing.
//
// The spec comes from kptr itself, but it names paths inside an image, and
// images are hostile: every target inside the new root is resolved with
// openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS) from a
// descriptor of the root and mounted on through /proc/self/fd, so a symbolic
// link in an image can never turn a mount into one on a host path. The spec
// parser is bounded and checks every length and count all the same.
//
// Every failure sends one record to the parent (step, target, errno) and
// exits; the Go side formats it. Plain C, no allocation but the spec buffer
// and its pointer arrays, raw system calls where glibc has no wrapper.

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include "nsinit.h"
#include "wire.h"

#ifndef __GLIBC__
#error "nsinit.c reads argv from its constructor's arguments, which glibc passes"
#endif

#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x00000004
#endif
#ifndef MOVE_MOUNT_T_EMPTY_PATH
#define MOVE_MOUNT_T_EMPTY_PATH 0x00000040
#endif

#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif

// struct mount_attr of mount_setattr(2), spelled here: glibc 2.36's
// <sys/mount.h> and <linux/mount.h> cannot both be included.
struct nsinit_mount_attr {
	uint64_t attr_set, attr_clr, propagation, userns_fd;
};
#define NSINIT_MOUNT_ATTR_RDONLY 0x00000001

// Flags a bind mount keeps through a remount: in a user namespace the kernel
// locks those of the source mount, and a remount that would clear one fails.
#define LOCKABLE (MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_NOATIME | MS_NODIRATIME | MS_RELATIME)
#define ATIME_FLAGS (MS_NOATIME | MS_RELATIME | MS_STRICTATIME)

// The spec as parsed: every string points into the received buffer,
// NUL-terminated there (the parser checked it).
struct dir {
	uint32_t mode;
	const char *path; // relative to the mount's target
};

struct mnt {
	const char *source, *target, *fstype, *data;
	unsigned long flags;
	uint32_t create;
	uint32_t ndirs;
	struct dir *dirs;
};

struct rlim {
	int32_t resource;
	uint64_t cur, max;
};

struct spec {
	uint64_t cloneflags;
	uint32_t opts;
	const char *root;
	uint32_t ntrees;
	const char **trees; // targets of the detached trees at fds syncfd+1...
	uint32_t ncgroups;  // cgroup files to join, at the fds after the trees
	uint32_t nmounts, ndevices, nmasks, nreadonly, nrlimits, nargs, nenv, nfilter;
	struct mnt *mounts;
	const char **devices, **masks, **readonly;
	const char *hostname;
	int32_t oom_score_adj;
	struct rlim *rlimits;
	uint32_t umask;
	uint32_t uid, gid;
	const char *cwd;
	char **args, **env;
	struct sock_filter *filter;
};

static int syncfd = -1;

// report sends one record to the parent: status, errno and a text of at
// most NSINIT_MSG_MAX bytes ("STEP TARGET").
static void report(char status, int err, const char *step, const char *target)
{
	char buf[1 + 4 + 2 + NSINIT_MSG_MAX];
	size_t n = 0, sl = strlen(step), tl = target ? strlen(target) : 0;
	int32_t e = err;
	uint16_t len;

	if (sl > NSINIT_MSG_MAX / 2)
		sl = NSINIT_MSG_MAX / 2; // so that the target's bound below stays positive
	if (tl > NSINIT_MSG_MAX - sl - 1)
		tl = NSINIT_MSG_MAX - sl - 1;
	len = sl + (target ? 1 + tl : 0);
	buf[n++] = status;
	memcpy(buf + n, &e, 4);
	n += 4;
	memcpy(buf + n, &len, 2);
	n += 2;
	memcpy(buf + n, step, sl);
	n += sl;
	if (target) {
		buf[n++] = ' ';
		memcpy(buf + n, target, tl);
		n += tl;
	}
	for (size_t off = 0; off < n;) {
		ssize_t w = write(syncfd, buf + off, n - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		off += w;
	}
}

// fail reports err for step/target and ends the init; nothing of it
// survives (the function has not been executed).
static void __attribute__((noreturn)) fail(int err, const char *step, const char *target)
{
	report(NSINIT_ERR, err, step, target);
	_exit(1);
}

static void readfull(void *p, size_t n) { readfull_fd(syncfd, p, n); }

// path checks a path is absolute (what the resolution beneath the root
// expects: it strips the leading slashes).
static const char *path(struct cur *c, const char *what)
{
	const char *s = str(c);
	if (s[0] != '/')
		bad(what);
	return s;
}

// below: p is a relative path of clean components, none "." or "..".
static int below(const char *p)
{
	const char *c = p;
	if (*p == 0 || *p == '/')
		return 0;
	while (*c) {
		const char *e = strchr(c, '/');
		size_t n = e ? (size_t)(e - c) : strlen(c);
		if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
			return 0;
		c += n;
		if (*c == '/' && *++c == 0)
			return 0; // a trailing slash
	}
	return 1;
}

static void parse(const char *buf, size_t len, struct spec *s)
{
	struct cur c = {buf, buf + len};

	s->cloneflags = u64(&c);
	s->opts = u32(&c);
	s->root = path(&c, "root not absolute");
	s->trees = strs(&c, &s->ntrees, "tree count");
	if (s->ntrees > NSINIT_MAX_TREES)
		bad("tree count");
	for (uint32_t i = 0; i < s->ntrees; i++)
		if (s->trees[i][0] != '/')
			bad("tree target not absolute");
	s->ncgroups = u32(&c);
	if (s->ncgroups > NSINIT_MAX_CGROUPS)
		bad("cgroup count");
	s->nmounts = count(&c, 4 * 5 + 8 + 4 + 4, NSINIT_MAX_COUNT, "mount count");
	s->mounts = alloc(s->nmounts, sizeof(*s->mounts));
	for (uint32_t i = 0; i < s->nmounts; i++) {
		struct mnt *m = &s->mounts[i];
		m->source = str(&c);
		m->target = path(&c, "mount target not absolute");
		m->fstype = str(&c);
		m->flags = u64(&c);
		m->data = str(&c);
		m->create = u32(&c);
		m->ndirs = count(&c, 4 + 6, NSINIT_MAX_COUNT, "dir count");
		m->dirs = alloc(m->ndirs, sizeof(*m->dirs));
		if (m->ndirs > 0 && m->fstype[0] == 0)
			bad("dirs in a bind mount");
		for (uint32_t j = 0; j < m->ndirs; j++) {
			struct dir *d = &m->dirs[j];
			d->mode = u32(&c);
			d->path = str(&c);
			if (d->mode & ~(uint32_t)(S_ISGID | S_ISVTX | 0777))
				bad("dir mode");
			if (!below(d->path))
				bad("dir path not clean and relative");
		}
	}
	s->devices = strs(&c, &s->ndevices, "device count");
	s->masks = strs(&c, &s->nmasks, "mask count");
	s->readonly = strs(&c, &s->nreadonly, "readonly count");
	for (uint32_t i = 0; i < s->ndevices; i++)
		if (s->devices[i][0] != '/')
			bad("device not absolute");
	for (uint32_t i = 0; i < s->nmasks; i++)
		if (s->masks[i][0] != '/')
			bad("masked path not absolute");
	for (uint32_t i = 0; i < s->nreadonly; i++)
		if (s->readonly[i][0] != '/')
			bad("read-only path not absolute");
	s->hostname = str(&c);
	s->oom_score_adj = (int32_t)u32(&c);
	s->nrlimits = count(&c, 20, 64, "rlimit count");
	s->rlimits = alloc(s->nrlimits, sizeof(*s->rlimits));
	for (uint32_t i = 0; i < s->nrlimits; i++) {
		s->rlimits[i].resource = (int32_t)u32(&c);
		s->rlimits[i].cur = u64(&c);
		s->rlimits[i].max = u64(&c);
	}
	s->umask = u32(&c);
	s->uid = u32(&c);
	s->gid = u32(&c);
	s->cwd = path(&c, "cwd not absolute");
	s->args = (char **)strs(&c, &s->nargs, "arg count");
	if (s->nargs == 0 || s->args[0][0] != '/')
		bad("args[0] not an absolute path");
	s->env = (char **)strs(&c, &s->nenv, "env count");
	s->filter = bpf_last(&c, &s->nfilter);
}

// --- paths beneath the root ----------------------------------------------

static int rootfd = -1;

// rel is a path inside the root as openat2 beneath rootfd wants it.
static const char *rel(const char *p)
{
	while (*p == '/')
		p++;
	return *p ? p : ".";
}

// beneath_at opens p below the directory dirfd without following any
// symbolic link and without leaving it.
static int beneath_at(int dirfd, const char *p, int flags)
{
	struct open_how how = {
		// No O_NOFOLLOW: with it a trailing link would be opened itself
		// (and a mount through /proc/self/fd land on it); without it,
		// RESOLVE_NO_SYMLINKS refuses it with ELOOP like any other.
		.flags = O_PATH | O_CLOEXEC | flags,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	long fd;
	do
		fd = syscall(SYS_openat2, dirfd, rel(p), &how, sizeof(how));
	while (fd < 0 && errno == EAGAIN);
	return fd;
}

// beneath opens p inside the new root without following any symbolic link
// (an image's /proc or /tmp that is a link to a host path is an error, never
// a mount there) and without leaving the root. Mounts made before are
// crossed: each target is opened only once the mounts before it exist.
static int beneath(const char *p, int flags) { return beneath_at(rootfd, p, flags); }

// itoa writes v in decimal into buf and returns it.
static char *itoa(char buf[24], long v)
{
	char d[24];
	int i = 0, n = 0;
	unsigned long u = v < 0 ? -(unsigned long)v : (unsigned long)v;
	do
		d[i++] = '0' + u % 10;
	while ((u /= 10) > 0);
	if (v < 0)
		buf[n++] = '-';
	while (i > 0)
		buf[n++] = d[--i];
	buf[n] = 0;
	return buf;
}

// fdpath is "/proc/self/fd/N" (the host's /proc: every mount is made before
// the pivot), so that mount(2) acts on exactly the opened object.
static char *fdpath(char buf[40], int fd)
{
	memcpy(buf, "/proc/self/fd/", 14);
	itoa(buf + 14, fd);
	return buf;
}

// Devices of file systems the init mounted itself (not binds): Create makes
// mount points only there, never in the image or a host directory.
static dev_t fresh[NSINIT_MAX_COUNT + 1];
static uint32_t nfresh;

static int isfresh(int fd)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return 0;
	for (uint32_t i = 0; i < nfresh; i++)
		if (fresh[i] == st.st_dev)
			return 1;
	return 0;
}

// create makes a missing target in its parent: a directory, or an empty file
// when the mount's source is not a directory.
static void create(const struct mnt *m, int dir)
{
	char parent[4096];
	const char *base = strrchr(m->target, '/') + 1;
	size_t pl = base - m->target;
	int pfd, err = 0;

	if (*base == 0 || strcmp(base, ".") == 0 || strcmp(base, "..") == 0 || pl >= sizeof(parent))
		fail(EINVAL, "create", m->target);
	memcpy(parent, m->target, pl);
	parent[pl] = 0;
	pfd = beneath(parent, O_DIRECTORY);
	if (pfd < 0)
		fail(errno, "create", m->target);
	if (!isfresh(pfd))
		fail(EPERM, "create (parent not a file system the init mounted)", m->target);
	if (dir) {
		if (mkdirat(pfd, base, 0755) < 0)
			err = errno;
	} else {
		int f = openat(pfd, base, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (f < 0)
			err = errno;
		else
			close(f);
	}
	if (err)
		fail(err, "create", m->target);
	close(pfd);
}

// mkdirs makes m's Dirs in the file system just mounted at its target, the
// init's own (nothing else can have made a link there, and none is
// followed), each with exactly its mode.
static void mkdirs(const struct mnt *m)
{
	int mfd;

	if (m->ndirs == 0)
		return;
	mfd = beneath(m->target, O_DIRECTORY);
	if (mfd < 0)
		fail(errno, "mount target", m->target);
	for (uint32_t i = 0; i < m->ndirs; i++) {
		const struct dir *d = &m->dirs[i];
		const char *base = strrchr(d->path, '/');
		int pfd = mfd;
		if (base != NULL) {
			char parent[4096];
			size_t pl = (size_t)(base - d->path);
			if (pl >= sizeof(parent))
				fail(ENAMETOOLONG, "mkdir", d->path);
			memcpy(parent, d->path, pl);
			parent[pl] = 0;
			pfd = beneath_at(mfd, parent, O_DIRECTORY);
			if (pfd < 0)
				fail(errno, "mkdir", d->path);
			base++;
		} else {
			base = d->path;
		}
		if (mkdirat(pfd, base, 0700) < 0)
			fail(errno, "mkdir", d->path);
		if (fchmodat(pfd, base, d->mode, 0) < 0)
			fail(errno, "chmod", d->path);
		if (pfd != mfd)
			close(pfd);
	}
	close(mfd);
}

// locked is the flags of the mount holding fd that a bind remount must keep.
static unsigned long locked(int fd, const char *target)
{
	struct statvfs sv;
	unsigned long f = 0;
	if (fstatvfs(fd, &sv) < 0)
		fail(errno, "statvfs", target);
	if (sv.f_flag & ST_RDONLY)
		f |= MS_RDONLY;
	if (sv.f_flag & ST_NOSUID)
		f |= MS_NOSUID;
	if (sv.f_flag & ST_NODEV)
		f |= MS_NODEV;
	if (sv.f_flag & ST_NOEXEC)
		f |= MS_NOEXEC;
	if (sv.f_flag & ST_NOATIME)
		f |= MS_NOATIME;
	if (sv.f_flag & ST_NODIRATIME)
		f |= MS_NODIRATIME;
	if (sv.f_flag & ST_RELATIME)
		f |= MS_RELATIME;
	return f;
}

// rdonly_tree makes the mount at fd and every mount beneath it read-only,
// with mount_setattr(2). Where that call is refused (a kernel before 5.12,
// or a seccomp profile without it: CRI-O's default), only the mount at fd
// is made read-only, by a remount, as libcontainer does everywhere.
static void rdonly_tree(int fd, const char *target)
{
	struct nsinit_mount_attr a = {.attr_set = NSINIT_MOUNT_ATTR_RDONLY};
	char t[40];
	if (syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &a, sizeof(a)) == 0)
		return;
	if (errno != ENOSYS && errno != EPERM)
		fail(errno, "mount_setattr read-only", target);
	if (mount(NULL, fdpath(t, fd), NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | locked(fd, target), NULL) < 0)
		fail(errno, "remount read-only", target);
}

// bind_mount binds srcfd onto target (resolved beneath the root) and applies the
// flags beyond MS_BIND|MS_REC by a remount that keeps the locked ones.
static void bind_mount(int srcfd, const char *target, unsigned long flags, const char *source)
{
	char s[40], t[40];
	int tfd = beneath(target, 0), mfd;
	unsigned long extra = flags & LOCKABLE, keep;

	if (tfd < 0)
		fail(errno, "mount target", target);
	if (mount(fdpath(s, srcfd), fdpath(t, tfd), NULL, MS_BIND | (flags & MS_REC), NULL) < 0)
		fail(errno, "bind", source ? source : target);
	close(tfd);
	if (extra == 0 && !(flags & MS_STRICTATIME))
		return;
	// The descriptor opened before the mount is its mount point; the new
	// mount is what the same path reaches now.
	mfd = beneath(target, 0);
	if (mfd < 0)
		fail(errno, "mount target", target);
	keep = locked(mfd, target);
	if (flags & ATIME_FLAGS)
		keep &= ~(MS_NOATIME | MS_RELATIME); // the caller chose the atime mode
	if (mount(NULL, fdpath(t, mfd), NULL, MS_BIND | MS_REMOUNT | extra | (flags & MS_STRICTATIME) | keep, NULL) < 0)
		fail(errno, "remount", target);
	if ((flags & MS_REC) && (flags & MS_RDONLY))
		rdonly_tree(mfd, target);
	close(mfd);
}

static void do_mount(const struct mnt *m, int track)
{
	char t[40];
	int tfd;

	if (m->fstype[0] == 0) {
		// A bind: the source is kptr's or the operator's host path
		// (links followed as the host sees them, before the pivot).
		int sfd, dir;
		struct stat st;
		if (!(m->flags & MS_BIND))
			fail(EINVAL, "mount (no file system type and no MS_BIND)", m->target);
		sfd = open(m->source, O_PATH | O_CLOEXEC);
		if (sfd < 0)
			fail(errno, "bind source", m->source);
		if (m->create) {
			if (fstat(sfd, &st) < 0)
				fail(errno, "bind source", m->source);
			dir = S_ISDIR(st.st_mode);
			tfd = beneath(m->target, 0);
			if (tfd < 0 && errno == ENOENT)
				create(m, dir);
			else if (tfd < 0)
				fail(errno, "mount target", m->target);
			else
				close(tfd);
		}
		bind_mount(sfd, m->target, m->flags & ~MS_BIND, m->source);
		close(sfd);
		return;
	}
	tfd = beneath(m->target, 0);
	if (tfd < 0 && errno == ENOENT && m->create) {
		create(m, 1);
		tfd = beneath(m->target, 0);
	}
	if (tfd < 0)
		fail(errno, "mount target", m->target);
	if (mount(m->source, fdpath(t, tfd), m->fstype, m->flags, m->data[0] ? m->data : NULL) < 0)
		fail(errno, "mount", m->target);
	close(tfd);
	mkdirs(m);
	if (track) {
		// Remember the new file system so that Create may make mount
		// points in it.
		int nfd = beneath(m->target, 0);
		struct stat st;
		if (nfd < 0 || fstat(nfd, &st) < 0)
			fail(errno, "mount target", m->target);
		fresh[nfresh++] = st.st_dev;
		close(nfd);
	}
}

// devices binds each host node onto an empty file of the same path in the
// root (a tmpfs /dev: in a user namespace mknod is refused) and adds the
// standard links to /proc/self/fd.
static void devices(const struct spec *s)
{
	static const char *links[][2] = {
		{"/proc/self/fd", "fd"}, {"/proc/self/fd/0", "stdin"},
		{"/proc/self/fd/1", "stdout"}, {"/proc/self/fd/2", "stderr"},
	};
	int devfd;

	if (s->ndevices == 0)
		return;
	devfd = beneath("/dev", O_DIRECTORY);
	if (devfd < 0)
		fail(errno, "mount target", "/dev");
	for (uint32_t i = 0; i < s->ndevices; i++) {
		const char *d = s->devices[i], *base = strrchr(d, '/') + 1;
		int src, f;
		if (strncmp(d, "/dev/", 5) != 0 || strchr(d + 5, '/') != NULL || *base == 0 || *base == '.')
			fail(EINVAL, "device", d);
		src = open(d, O_PATH | O_CLOEXEC);
		if (src < 0)
			fail(errno, "device", d);
		// A new empty file in the init's own /dev (O_EXCL: never an
		// existing file, O_NOFOLLOW: never through a link).
		f = openat(devfd, base, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (f < 0)
			fail(errno, "create", d);
		close(f);
		bind_mount(src, d, 0, d);
		close(src);
	}
	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++)
		if (symlinkat(links[i][0], devfd, links[i][1]) < 0)
			fail(errno, "symlink /dev", links[i][1]);
	close(devfd);
}

// masks hides each path: a file under the new /dev/null, a directory under
// an empty read-only tmpfs. A missing path is skipped; a link is an error.
static void masks(const struct spec *s)
{
	char src[40], t[40];
	int null = -1;

	for (uint32_t i = 0; i < s->nmasks; i++) {
		const char *p = s->masks[i];
		struct stat st;
		int fd = beneath(p, 0);
		if (fd < 0 && errno == ENOENT)
			continue;
		if (fd < 0 || fstat(fd, &st) < 0)
			fail(errno, "mask", p);
		if (S_ISDIR(st.st_mode)) {
			if (mount("tmpfs", fdpath(t, fd), "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
				fail(errno, "mask", p);
		} else {
			if (null < 0 && (null = beneath("/dev/null", 0)) < 0)
				fail(errno, "mask (source /dev/null)", p);
			if (mount(fdpath(src, null), fdpath(t, fd), NULL, MS_BIND, NULL) < 0)
				fail(errno, "mask", p);
		}
		close(fd);
	}
	if (null >= 0)
		close(null);
}

// readonly binds each path onto itself and makes it, and every mount
// beneath it, read-only. A missing path is skipped.
static void readonly(const struct spec *s)
{
	char t[40];
	for (uint32_t i = 0; i < s->nreadonly; i++) {
		const char *p = s->readonly[i];
		int fd = beneath(p, 0), mfd;
		if (fd < 0 && errno == ENOENT)
			continue;
		if (fd < 0)
			fail(errno, "read-only", p);
		if (mount(fdpath(t, fd), t, NULL, MS_BIND | MS_REC, NULL) < 0)
			fail(errno, "read-only bind", p);
		close(fd);
		if ((mfd = beneath(p, 0)) < 0)
			fail(errno, "read-only", p);
		rdonly_tree(mfd, p);
		close(mfd);
	}
}

// --- the steps ------------------------------------------------------------

static void filesystem(const struct spec *s)
{
	int track = 0;

	// Nothing the init mounts may propagate back to the host's mounts.
	if (mount("", "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		fail(errno, "mount private", "/");
	// The detached trees the parent opened (sources this process's uids
	// could not reach by path), each onto its empty directory: in this
	// mount namespace only.
	for (uint32_t i = 0; i < s->ntrees; i++) {
		int tfd = open(s->trees[i], O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (tfd < 0)
			fail(errno, "tree target", s->trees[i]);
		if (syscall(SYS_move_mount, syncfd + 1 + (int)i, "", tfd, "",
			    MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
			fail(errno, "attach tree", s->trees[i]);
		close(tfd);
		close(syncfd + 1 + i);
	}
	// The root becomes a mount point of its own (pivot_root needs one) and
	// the descriptor every path inside it is resolved from.
	if (mount(s->root, s->root, NULL, MS_BIND | MS_REC, NULL) < 0)
		fail(errno, "bind root", s->root);
	rootfd = open(s->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		fail(errno, "open root", s->root);
	for (uint32_t i = 0; i < s->nmounts; i++)
		track |= s->mounts[i].create;
	for (uint32_t i = 0; i < s->nmounts; i++)
		do_mount(&s->mounts[i], track);
	devices(s);
	masks(s);
	readonly(s);

	// Into the root, and the old one detached: nothing of the host's
	// mounts stays reachable.
	if (fchdir(rootfd) < 0)
		fail(errno, "chdir", s->root);
	if (syscall(SYS_pivot_root, ".", ".") < 0)
		fail(errno, "pivot_root", s->root);
	if (umount2(".", MNT_DETACH) < 0)
		fail(errno, "umount old root", NULL);
	if (chdir("/") < 0)
		fail(errno, "chdir", "/");
	close(rootfd);
	if (s->opts & NSINIT_OPT_READONLY_ROOT) {
		unsigned long keep;
		int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0)
			fail(errno, "open", "/");
		keep = locked(fd, "/");
		close(fd);
		if (mount(NULL, "/", NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | keep, NULL) < 0)
			fail(errno, "remount read-only", "/");
	}
}

static void system_settings(const struct spec *s)
{
	if (s->hostname[0] && sethostname(s->hostname, strlen(s->hostname)) < 0)
		fail(errno, "sethostname", s->hostname);
	if (s->opts & NSINIT_OPT_LOOPBACK) {
		struct ifreq ifr;
		int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			fail(errno, "loopback socket", NULL);
		memset(&ifr, 0, sizeof(ifr));
		memcpy(ifr.ifr_name, "lo", 3);
		if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
			fail(errno, "loopback flags", "lo");
		ifr.ifr_flags |= IFF_UP;
		if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
			fail(errno, "loopback up", "lo");
		close(fd);
	}
	if (s->oom_score_adj != 0) {
		char b[24];
		int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
		ssize_t n = strlen(itoa(b, s->oom_score_adj));
		if (fd < 0 || write(fd, b, n) != n)
			fail(errno, "write", "/proc/self/oom_score_adj");
		close(fd);
	}
	for (uint32_t i = 0; i < s->nrlimits; i++) {
		struct rlimit r = {.rlim_cur = s->rlimits[i].cur, .rlim_max = s->rlimits[i].max};
		if (setrlimit(s->rlimits[i].resource, &r) < 0) {
			char b[24];
			fail(errno, "setrlimit", itoa(b, s->rlimits[i].resource));
		}
	}
	umask(s->umask);
}

// credentials leaves the process as uid:gid with no supplementary group, no
// capability in any set (also across execve: the bounding and inheritable
// sets are empty, so not even container root regains one), no_new_privs.
static void credentials(const struct spec *s)
{
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct data[2];

	if ((s->opts & NSINIT_OPT_SETGROUPS) && syscall(SYS_setgroups, 0, NULL) < 0)
		fail(errno, "setgroups", NULL);
	for (int c = 0;; c++) {
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) == 0)
			continue;
		if (errno == EINVAL && c > 0)
			break; // past the kernel's last capability
		fail(errno, "drop bounding capability", NULL);
	}
	if (syscall(SYS_setresgid, s->gid, s->gid, s->gid) < 0)
		fail(errno, "setresgid", NULL);
	if (syscall(SYS_setresuid, s->uid, s->uid, s->uid) < 0)
		fail(errno, "setresuid", NULL);
	memset(data, 0, sizeof(data));
	if (syscall(SYS_capset, &hdr, data) < 0)
		fail(errno, "capset", NULL);
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
		fail(errno, "clear ambient capabilities", NULL);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		fail(errno, "no_new_privs", NULL);
	// A credential change clears the parent-death signal: re-arm it, so the
	// init still dies with kptr.
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		fail(errno, "pdeathsig", NULL);
	// As the function's uid: a working directory it cannot enter fails here.
	if (chdir(s->cwd) < 0)
		fail(errno, "chdir", s->cwd);
	if (s->nfilter > 0) {
		struct sock_fprog prog = {.len = s->nfilter, .filter = s->filter};
		if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
			fail(errno, "seccomp", NULL);
	}
}

// The container's init runs on a stack of its own (it shares this
// process's memory until it executes the function): 256 KiB above a guard
// page. Its deepest frames hold a few path buffers of 4 KiB.
#define INIT_STACK (256 << 10)

static int container(void *arg);

// namespaces enters the spec's namespaces (but the cgroup namespace, which
// the container's init unshares once the parent has joined it to its
// cgroups) and clones the container's init; this process then exits. It is
// the parent's plain child (a vfork and exec for the parent, whatever its
// size: a clone with CLONE_NEWUSER would be a full fork of it):
//   - the user namespace first, mapped by the parent, which alone may map
//     more ids than its own; then container root in it (as root kptr's own
//     uid is not mapped);
//   - the others, then a clone: a new pid namespace takes effect from the
//     next child, which is pid 1 there. CLONE_PARENT makes it the parent's
//     child, the process the parent waits for and kills through a pidfd.
//     CLONE_VM: it shares this process's memory (nothing of it is copied,
//     and this process's exit frees nothing) until it executes the
//     function, which replaces it. The two never run the same code at
//     once: this process only reports the pid and exits, and the parent
//     reaps it before it lets the container's init go on (NSINIT_GO_SETUP);
//     until then that one only sets its parent-death signal and reads. No
//     allocation happens in either after the clone.
static void namespaces(const struct spec *s)
{
	unsigned long rest = s->cloneflags & ~(unsigned long)(CLONE_NEWUSER | CLONE_NEWCGROUP);
	char go, *stack;
	long pid;

	if (s->cloneflags & CLONE_NEWUSER) {
		if (unshare(CLONE_NEWUSER) < 0)
			fail(errno, "unshare", "user namespace");
		report(NSINIT_MAP, 0, "", NULL);
		readfull(&go, 1);
		if (go != NSINIT_GO_MAPPED)
			bad("expected the maps");
		if (syscall(SYS_setresgid, 0, 0, 0) < 0)
			fail(errno, "setresgid", "0");
		if (syscall(SYS_setresuid, 0, 0, 0) < 0)
			fail(errno, "setresuid", "0");
		// The uid change made the process non-dumpable, which would leave
		// its /proc files (oom_score_adj) to host root.
		if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0)
			fail(errno, "dumpable", NULL);
	}
	if (rest != 0 && unshare(rest) < 0)
		fail(errno, "unshare", "namespaces");
	stack = mmap(NULL, INIT_STACK + 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (stack == MAP_FAILED)
		fail(errno, "mmap", "stack");
	if (mprotect(stack, 4096, PROT_NONE) < 0)
		fail(errno, "mprotect", "stack guard");
	pid = clone(container, stack + INIT_STACK + 4096, CLONE_VM | CLONE_PARENT | SIGCHLD, (void *)s);
	if (pid < 0)
		fail(errno, "clone", NULL);
	report(NSINIT_PID, (int)pid, "", NULL);
	_exit(0);
}

// join_cgroups moves the init into each cgroup whose cgroup v1 "tasks" file
// the parent opened for it (Spec.JoinCgroups), by writing 0 ("the writing
// thread") to it, and closes it. A thread that moves itself takes no global
// lock in the kernel, where a write of another process's pid to
// cgroup.procs write-locks every thread group and waits for an RCU grace
// period (about 10 ms here): the largest single cost of a start. The
// kernel checks the write against the credentials of the file's opener
// (kptr), not the init's. Any failure ends the init: a run never starts
// outside its cgroups.
static void join_cgroups(const struct spec *s)
{
	for (uint32_t i = 0; i < s->ncgroups; i++) {
		int fd = syncfd + 1 + (int)s->ntrees + (int)i;
		if (write(fd, "0", 1) != 1)
			fail(errno, "join cgroup", NULL);
		close(fd);
	}
}

// container is the container's init, pid 1 of its pid namespace: it waits
// for the parent's go, sets the container up, reports ready, waits for the
// release and executes the function.
static int container(void *arg)
{
	const struct spec *s = arg;
	char go;

	// Its parent-death signal is its own (a clone does not inherit one);
	// if kptr died before this line, the socket's EOF ends it at the next
	// read.
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		fail(errno, "pdeathsig", NULL);
	readfull(&go, 1);
	if (go != NSINIT_GO_SETUP)
		bad("expected the set-up");
	join_cgroups(s);
	// Now: the init is in its cgroups (the parent joined it, or it joined
	// them itself), which become the namespace's root.
	if ((s->cloneflags & CLONE_NEWCGROUP) && unshare(CLONE_NEWCGROUP) < 0)
		fail(errno, "unshare", "cgroup");
	filesystem(s);
	system_settings(s);
	credentials(s);

	report(NSINIT_READY, 0, "", NULL);
	readfull(&go, 1); // EOF: the parent is gone or gave up
	execve(s->args[0], s->args, s->env);
	report(NSINIT_ERR, errno, "exec", s->args[0]);
	_exit(127);
}

// the spec, shared with the container's init (static: it outlives the
// frame of the process that parsed it)
static struct spec spec;

static void init(void)
{
	uint32_t len;
	char *buf;

	if (fcntl(syncfd, F_SETFD, FD_CLOEXEC) < 0)
		fail(errno, "fcntl", NULL);
	if (syncfd > 3 && syscall(SYS_close_range, 3, syncfd - 1, 0) < 0)
		fail(errno, "close_range", NULL);
	buf = read_spec(syncfd, NSINIT_MAGIC, &len);
	parse(buf, len, &spec);
	// Nothing but fds 0-2, the sync socket, the trees (attached and closed
	// before the pivot) and the cgroup files (closed once joined) may reach
	// the function; the socket is closed by execve.
	if (syscall(SYS_close_range, syncfd + 1 + spec.ntrees + spec.ncgroups, ~0U, 0) < 0)
		fail(errno, "close_range", NULL);
	namespaces(&spec); // does not return
}

// nsinit_ctor is the whole init when the process is one (argv[1] and the
// environment's sync descriptor); in any other process it returns without
// a system call.
__attribute__((constructor)) static void nsinit_ctor(int argc, char **argv, char **envp)
{
	int fd = ctor_fd(argc, argv, envp, NSINIT_ARG, NSINIT_ENV "=");

	if (fd < 0)
		return;
	syncfd = fd;
	init();
	_exit(1); // not reached
}
