/*
 * An LD_PRELOAD shim that makes filesystem calls fail on purpose, for tests/io_faults.rs.
 *
 * Only calls on paths under STOWBENCH_FAULT_PATH (an absolute prefix), or on file descriptors
 * opened under it, are counted or failed; everything else passes straight through. Calls are
 * grouped in families (see `family_names`); for each family the shim counts calls 1, 2, 3, ...
 *
 *   STOWBENCH_FAULT_CALL   the family to fail (open, write, read, fsync, rename, truncate,
 *                          mkdir, unlink, stat); unset: fail nothing
 *   STOWBENCH_FAULT_NTH    fail that family's n-th call (1-based)
 *   STOWBENCH_FAULT_MODE   transient: only the n-th call fails; persistent: it and every later one
 *   STOWBENCH_FAULT_ERRNO  the errno to fail with (a number; default EIO)
 *   STOWBENCH_FAULT_COUNT  a file to which, at exit, the process appends one line: its pid and
 *                          "family=count" for every family (only when it counted anything)
 *   STOWBENCH_FAULT_LOG    a file to which each injected failure appends one line:
 *                          "<family> <call> <n> <path>"
 *   STOWBENCH_FAULT_TRACE  a file to which every watched call appends one line, as the log's
 *                          ("ok" or "FAILED" in place of n), so a test can see what came after
 *                          a failure
 *
 * A failed call does nothing (no bytes written, nothing synced, nothing renamed): a device that
 * refuses. Thread-safe: counters are atomics, the fd table is an array of atomic flags.
 * Build: cc -shared -fPIC -O2 -o shim.so shim.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>
#include <limits.h>

enum family { F_OPEN, F_WRITE, F_READ, F_FSYNC, F_RENAME, F_TRUNCATE, F_MKDIR, F_UNLINK, F_STAT, F_COUNT };
static const char *family_names[F_COUNT] = { "open", "write", "read", "fsync", "rename", "truncate", "mkdir", "unlink", "stat" };

#define MAX_FDS 65536
static unsigned char fd_marked[MAX_FDS]; /* accessed with __atomic builtins */
/* The path each watched fd was opened with (for the log); strings are never freed, so a reader
 * racing a close sees an old path, never freed memory. */
static char *fd_path[MAX_FDS];
static unsigned long counts[F_COUNT];     /* accessed with __atomic builtins */

static char prefix[PATH_MAX];
static size_t prefix_len;
static int fail_family = -1;
static unsigned long fail_nth;
static int fail_persistent;
static int fail_errno = EIO;
static const char *count_file;
static const char *log_file;
static const char *trace_file;

static __attribute__((constructor)) void shim_init(void) {
    const char *p = getenv("STOWBENCH_FAULT_PATH");
    if (p && *p && strlen(p) < sizeof prefix) {
        strcpy(prefix, p);
        prefix_len = strlen(prefix);
        while (prefix_len > 1 && prefix[prefix_len - 1] == '/')
            prefix[--prefix_len] = 0;
    }
    const char *call = getenv("STOWBENCH_FAULT_CALL");
    for (int f = 0; call && f < F_COUNT; f++)
        if (strcmp(call, family_names[f]) == 0)
            fail_family = f;
    const char *nth = getenv("STOWBENCH_FAULT_NTH");
    fail_nth = nth ? strtoul(nth, NULL, 10) : 0;
    const char *mode = getenv("STOWBENCH_FAULT_MODE");
    fail_persistent = mode && strcmp(mode, "persistent") == 0;
    const char *e = getenv("STOWBENCH_FAULT_ERRNO");
    if (e && atoi(e) > 0)
        fail_errno = atoi(e);
    count_file = getenv("STOWBENCH_FAULT_COUNT");
    log_file = getenv("STOWBENCH_FAULT_LOG");
    trace_file = getenv("STOWBENCH_FAULT_TRACE");
}

#define REAL(name) \
    static __typeof__(&name) real_##name; \
    if (!real_##name) real_##name = (__typeof__(&name))dlsym(RTLD_NEXT, #name)

/* Appends one line to `file` with plain syscalls (no stdio: this may run inside any call). */
static void append_line(const char *file, const char *line) {
    static int (*real_open)(const char *, int, ...);
    static ssize_t (*real_write)(int, const void *, size_t);
    static int (*real_close)(int);
    if (!real_open) real_open = dlsym(RTLD_NEXT, "open");
    if (!real_write) real_write = dlsym(RTLD_NEXT, "write");
    if (!real_close) real_close = dlsym(RTLD_NEXT, "close");
    int fd = real_open(file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return;
    real_write(fd, line, strlen(line));
    real_close(fd);
}

static __attribute__((destructor)) void shim_fini(void) {
    if (!count_file || !prefix_len) return;
    char line[1024];
    int n = snprintf(line, sizeof line, "%d", (int)getpid());
    unsigned long total = 0;
    for (int f = 0; f < F_COUNT; f++) {
        unsigned long c = __atomic_load_n(&counts[f], __ATOMIC_SEQ_CST);
        total += c;
        n += snprintf(line + n, sizeof line - n, " %s=%lu", family_names[f], c);
    }
    snprintf(line + n, sizeof line - n, "\n");
    if (total) append_line(count_file, line);
}

static int at_under(int dirfd, const char *path);

/* A path argument: absolute ones by prefix, relative ones by the working directory. */
static int path_under(const char *path) {
    if (!prefix_len || !path) return 0;
    if (path[0] != '/') return at_under(AT_FDCWD, path);
    if (strncmp(path, prefix, prefix_len) != 0) return 0;
    return path[prefix_len] == 0 || path[prefix_len] == '/';
}

static int fd_under(int fd) {
    return fd >= 0 && fd < MAX_FDS && __atomic_load_n(&fd_marked[fd], __ATOMIC_ACQUIRE);
}

/* A path argument of an *at call: absolute paths by prefix, relative ones by their directory. */
static int at_under(int dirfd, const char *path) {
    if (!path) return fd_under(dirfd);
    if (path[0] == '/') return path_under(path);
    if (dirfd == AT_FDCWD) {
        char cwd[PATH_MAX];
        return prefix_len && getcwd(cwd, sizeof cwd) && cwd[0] == '/' && path_under(cwd);
    }
    return fd_under(dirfd);
}

static void mark(int fd, int on) {
    if (fd >= 0 && fd < MAX_FDS) __atomic_store_n(&fd_marked[fd], (unsigned char)on, __ATOMIC_RELEASE);
}

/* Remembers the path a watched fd was opened with: `path`, or relative to `dirfd`'s. */
static void remember(int fd, int dirfd, const char *path) {
    if (fd < 0 || fd >= MAX_FDS || !path || !(log_file || trace_file)) return;
    char full[PATH_MAX];
    const char *base = (path[0] != '/' && dirfd >= 0 && dirfd < MAX_FDS) ? __atomic_load_n(&fd_path[dirfd], __ATOMIC_ACQUIRE) : NULL;
    if (base) snprintf(full, sizeof full, "%s/%s", base, path);
    else snprintf(full, sizeof full, "%s", path);
    __atomic_store_n(&fd_path[fd], strdup(full), __ATOMIC_RELEASE);
}

static const char *path_of(int fd) {
    const char *p = fd >= 0 && fd < MAX_FDS ? __atomic_load_n(&fd_path[fd], __ATOMIC_ACQUIRE) : NULL;
    return p ? p : "?";
}

/* Counts one call of `family` on a watched path or fd; returns 1 when it must fail (errno set). */
static int inject(int family, const char *call, const char *path, int fd) {
    unsigned long n = __atomic_add_fetch(&counts[family], 1, __ATOMIC_SEQ_CST);
    int fail = family == fail_family && fail_nth > 0 && (n == fail_nth || (fail_persistent && n > fail_nth));
    char full[PATH_MAX];
    if (path && path[0] != '/' && fd >= 0) snprintf(full, sizeof full, "%s/%s", path_of(fd), path);
    else snprintf(full, sizeof full, "%s", path ? path : path_of(fd));
    char line[PATH_MAX + 128];
    if (trace_file) {
        snprintf(line, sizeof line, "%s %s %s %s\n", family_names[family], call, fail ? "FAILED" : "ok", full);
        append_line(trace_file, line);
    }
    if (!fail) return 0;
    if (log_file) {
        snprintf(line, sizeof line, "%s %s %lu %s\n", family_names[family], call, n, full);
        append_line(log_file, line);
    }
    errno = fail_errno;
    return 1;
}

#define CHECK_PATH(fam, call, path, failval) \
    do { if (path_under(path) && inject(fam, call, path, -1)) return failval; } while (0)
#define CHECK_AT(fam, call, dirfd, path, failval) \
    do { if (at_under(dirfd, path) && inject(fam, call, path, dirfd)) return failval; } while (0)
#define CHECK_FD(fam, call, fd, failval) \
    do { if (fd_under(fd) && inject(fam, call, NULL, fd)) return failval; } while (0)

/* ---- open ---- */
static mode_t mode_arg(int flags, va_list ap) {
    return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? (mode_t)va_arg(ap, int) : 0;
}

#define OPEN_LIKE(name) \
    int name(const char *path, int flags, ...) { \
        va_list ap; va_start(ap, flags); mode_t mode = mode_arg(flags, ap); va_end(ap); \
        REAL(name); \
        int watched = path_under(path); \
        if (watched && inject(F_OPEN, #name, path, -1)) return -1; \
        int fd = real_##name(path, flags, mode); \
        if (fd >= 0) mark(fd, watched); \
        if (fd >= 0 && watched) remember(fd, AT_FDCWD, path); \
        return fd; \
    }
OPEN_LIKE(open)
OPEN_LIKE(open64)

#define OPENAT_LIKE(name) \
    int name(int dirfd, const char *path, int flags, ...) { \
        va_list ap; va_start(ap, flags); mode_t mode = mode_arg(flags, ap); va_end(ap); \
        REAL(name); \
        int watched = at_under(dirfd, path); \
        if (watched && inject(F_OPEN, #name, path, dirfd)) return -1; \
        int fd = real_##name(dirfd, path, flags, mode); \
        if (fd >= 0) mark(fd, watched); \
        if (fd >= 0 && watched) remember(fd, dirfd, path); \
        return fd; \
    }
OPENAT_LIKE(openat)
OPENAT_LIKE(openat64)

int creat(const char *path, mode_t mode) { return open(path, O_CREAT | O_WRONLY | O_TRUNC, mode); }
int creat64(const char *path, mode_t mode) { return open64(path, O_CREAT | O_WRONLY | O_TRUNC, mode); }

/* Fortified variants (_FORTIFY_SOURCE builds of C code call these). */
int __open_2(const char *path, int flags) { return open(path, flags); }
int __open64_2(const char *path, int flags) { return open64(path, flags); }
int __openat_2(int dirfd, const char *path, int flags) { return openat(dirfd, path, flags); }
int __openat64_2(int dirfd, const char *path, int flags) { return openat64(dirfd, path, flags); }

/* A duplicate is watched when its original is, under the same path. */
static void copy_fd(int from, int to) {
    mark(to, fd_under(from));
    if (to >= 0 && to < MAX_FDS && from >= 0 && from < MAX_FDS)
        __atomic_store_n(&fd_path[to], __atomic_load_n(&fd_path[from], __ATOMIC_ACQUIRE), __ATOMIC_RELEASE);
}

int close(int fd) {
    REAL(close);
    mark(fd, 0);
    return real_close(fd);
}

int dup(int fd) {
    REAL(dup);
    int r = real_dup(fd);
    if (r >= 0) copy_fd(fd, r);
    return r;
}

int dup2(int fd, int to) {
    REAL(dup2);
    int r = real_dup2(fd, to);
    if (r >= 0) copy_fd(fd, r);
    return r;
}

int dup3(int fd, int to, int flags) {
    REAL(dup3);
    int r = real_dup3(fd, to, flags);
    if (r >= 0) copy_fd(fd, r);
    return r;
}

/* ---- write ---- */
ssize_t write(int fd, const void *buf, size_t n) { REAL(write); CHECK_FD(F_WRITE, "write", fd, -1); return real_write(fd, buf, n); }
ssize_t pwrite(int fd, const void *buf, size_t n, off_t off) { REAL(pwrite); CHECK_FD(F_WRITE, "pwrite", fd, -1); return real_pwrite(fd, buf, n, off); }
ssize_t pwrite64(int fd, const void *buf, size_t n, off64_t off) { REAL(pwrite64); CHECK_FD(F_WRITE, "pwrite64", fd, -1); return real_pwrite64(fd, buf, n, off); }
ssize_t writev(int fd, const struct iovec *v, int c) { REAL(writev); CHECK_FD(F_WRITE, "writev", fd, -1); return real_writev(fd, v, c); }
ssize_t pwritev(int fd, const struct iovec *v, int c, off_t off) { REAL(pwritev); CHECK_FD(F_WRITE, "pwritev", fd, -1); return real_pwritev(fd, v, c, off); }
ssize_t pwritev64(int fd, const struct iovec *v, int c, off64_t off) { REAL(pwritev64); CHECK_FD(F_WRITE, "pwritev64", fd, -1); return real_pwritev64(fd, v, c, off); }
ssize_t pwritev2(int fd, const struct iovec *v, int c, off_t off, int flags) { REAL(pwritev2); CHECK_FD(F_WRITE, "pwritev2", fd, -1); return real_pwritev2(fd, v, c, off, flags); }
ssize_t pwritev64v2(int fd, const struct iovec *v, int c, off64_t off, int flags) { REAL(pwritev64v2); CHECK_FD(F_WRITE, "pwritev64v2", fd, -1); return real_pwritev64v2(fd, v, c, off, flags); }
ssize_t copy_file_range(int in, off64_t *inoff, int out, off64_t *outoff, size_t n, unsigned flags) {
    REAL(copy_file_range); CHECK_FD(F_WRITE, "copy_file_range", out, -1); CHECK_FD(F_READ, "copy_file_range", in, -1);
    return real_copy_file_range(in, inoff, out, outoff, n, flags);
}

/* ---- read ---- */
ssize_t read(int fd, void *buf, size_t n) { REAL(read); CHECK_FD(F_READ, "read", fd, -1); return real_read(fd, buf, n); }
ssize_t pread(int fd, void *buf, size_t n, off_t off) { REAL(pread); CHECK_FD(F_READ, "pread", fd, -1); return real_pread(fd, buf, n, off); }
ssize_t pread64(int fd, void *buf, size_t n, off64_t off) { REAL(pread64); CHECK_FD(F_READ, "pread64", fd, -1); return real_pread64(fd, buf, n, off); }
ssize_t readv(int fd, const struct iovec *v, int c) { REAL(readv); CHECK_FD(F_READ, "readv", fd, -1); return real_readv(fd, v, c); }
ssize_t preadv(int fd, const struct iovec *v, int c, off_t off) { REAL(preadv); CHECK_FD(F_READ, "preadv", fd, -1); return real_preadv(fd, v, c, off); }
ssize_t preadv64(int fd, const struct iovec *v, int c, off64_t off) { REAL(preadv64); CHECK_FD(F_READ, "preadv64", fd, -1); return real_preadv64(fd, v, c, off); }
ssize_t preadv2(int fd, const struct iovec *v, int c, off_t off, int flags) { REAL(preadv2); CHECK_FD(F_READ, "preadv2", fd, -1); return real_preadv2(fd, v, c, off, flags); }

/* ---- fsync ---- */
int fsync(int fd) { REAL(fsync); CHECK_FD(F_FSYNC, "fsync", fd, -1); return real_fsync(fd); }
int fdatasync(int fd) { REAL(fdatasync); CHECK_FD(F_FSYNC, "fdatasync", fd, -1); return real_fdatasync(fd); }
int sync_file_range(int fd, off64_t off, off64_t n, unsigned int flags) {
    REAL(sync_file_range); CHECK_FD(F_FSYNC, "sync_file_range", fd, -1); return real_sync_file_range(fd, off, n, flags);
}
int syncfs(int fd) { REAL(syncfs); CHECK_FD(F_FSYNC, "syncfs", fd, -1); return real_syncfs(fd); }

/* ---- rename ---- */
/* After a rename, fds opened under the old name are known by the new one (for the log). */
static void renamed(const char *from, const char *to) {
    if (!(log_file || trace_file) || from[0] != '/' || to[0] != '/') return;
    for (int fd = 0; fd < MAX_FDS; fd++) {
        const char *p = __atomic_load_n(&fd_path[fd], __ATOMIC_ACQUIRE);
        if (p && fd_under(fd) && strcmp(p, from) == 0) __atomic_store_n(&fd_path[fd], strdup(to), __ATOMIC_RELEASE);
    }
}

int rename(const char *a, const char *b) {
    REAL(rename);
    if ((path_under(a) || path_under(b)) && inject(F_RENAME, "rename", a, -1)) return -1;
    int r = real_rename(a, b);
    if (r == 0 && path_under(b)) renamed(a, b);
    return r;
}
int renameat(int da, const char *a, int db, const char *b) {
    REAL(renameat);
    if ((at_under(da, a) || at_under(db, b)) && inject(F_RENAME, "renameat", a, da)) return -1;
    return real_renameat(da, a, db, b);
}
int renameat2(int da, const char *a, int db, const char *b, unsigned int flags) {
    REAL(renameat2);
    if ((at_under(da, a) || at_under(db, b)) && inject(F_RENAME, "renameat2", a, da)) return -1;
    return real_renameat2(da, a, db, b, flags);
}

/* ---- truncate / allocate ---- */
int ftruncate(int fd, off_t n) { REAL(ftruncate); CHECK_FD(F_TRUNCATE, "ftruncate", fd, -1); return real_ftruncate(fd, n); }
int ftruncate64(int fd, off64_t n) { REAL(ftruncate64); CHECK_FD(F_TRUNCATE, "ftruncate64", fd, -1); return real_ftruncate64(fd, n); }
int truncate(const char *p, off_t n) { REAL(truncate); CHECK_PATH(F_TRUNCATE, "truncate", p, -1); return real_truncate(p, n); }
int truncate64(const char *p, off64_t n) { REAL(truncate64); CHECK_PATH(F_TRUNCATE, "truncate64", p, -1); return real_truncate64(p, n); }
int fallocate(int fd, int mode, off_t off, off_t n) { REAL(fallocate); CHECK_FD(F_TRUNCATE, "fallocate", fd, -1); return real_fallocate(fd, mode, off, n); }
int fallocate64(int fd, int mode, off64_t off, off64_t n) { REAL(fallocate64); CHECK_FD(F_TRUNCATE, "fallocate64", fd, -1); return real_fallocate64(fd, mode, off, n); }
/* posix_fallocate returns the error number instead of setting errno. */
int posix_fallocate(int fd, off_t off, off_t n) {
    REAL(posix_fallocate);
    if (fd_under(fd) && inject(F_TRUNCATE, "posix_fallocate", NULL, fd)) return errno;
    return real_posix_fallocate(fd, off, n);
}
int posix_fallocate64(int fd, off64_t off, off64_t n) {
    REAL(posix_fallocate64);
    if (fd_under(fd) && inject(F_TRUNCATE, "posix_fallocate64", NULL, fd)) return errno;
    return real_posix_fallocate64(fd, off, n);
}

/* ---- mkdir ---- */
int mkdir(const char *p, mode_t m) { REAL(mkdir); CHECK_PATH(F_MKDIR, "mkdir", p, -1); return real_mkdir(p, m); }
int mkdirat(int d, const char *p, mode_t m) { REAL(mkdirat); CHECK_AT(F_MKDIR, "mkdirat", d, p, -1); return real_mkdirat(d, p, m); }

/* ---- unlink ---- */
int unlink(const char *p) { REAL(unlink); CHECK_PATH(F_UNLINK, "unlink", p, -1); return real_unlink(p); }
int unlinkat(int d, const char *p, int f) { REAL(unlinkat); CHECK_AT(F_UNLINK, "unlinkat", d, p, -1); return real_unlinkat(d, p, f); }
int rmdir(const char *p) { REAL(rmdir); CHECK_PATH(F_UNLINK, "rmdir", p, -1); return real_rmdir(p); }

/* ---- stat ---- */
int stat(const char *p, struct stat *s) { REAL(stat); CHECK_PATH(F_STAT, "stat", p, -1); return real_stat(p, s); }
int stat64(const char *p, struct stat64 *s) { REAL(stat64); CHECK_PATH(F_STAT, "stat64", p, -1); return real_stat64(p, s); }
int lstat(const char *p, struct stat *s) { REAL(lstat); CHECK_PATH(F_STAT, "lstat", p, -1); return real_lstat(p, s); }
int lstat64(const char *p, struct stat64 *s) { REAL(lstat64); CHECK_PATH(F_STAT, "lstat64", p, -1); return real_lstat64(p, s); }
int fstat(int fd, struct stat *s) { REAL(fstat); CHECK_FD(F_STAT, "fstat", fd, -1); return real_fstat(fd, s); }
int fstat64(int fd, struct stat64 *s) { REAL(fstat64); CHECK_FD(F_STAT, "fstat64", fd, -1); return real_fstat64(fd, s); }
int fstatat(int d, const char *p, struct stat *s, int f) { REAL(fstatat); CHECK_AT(F_STAT, "fstatat", d, p, -1); return real_fstatat(d, p, s, f); }
int fstatat64(int d, const char *p, struct stat64 *s, int f) { REAL(fstatat64); CHECK_AT(F_STAT, "fstatat64", d, p, -1); return real_fstatat64(d, p, s, f); }
int statx(int d, const char *p, int f, unsigned int m, struct statx *s) {
    REAL(statx);
    /* An empty relative path (AT_EMPTY_PATH) is an fstat of d: at_under looks at d then. */
    if (at_under(d, p) && inject(F_STAT, "statx", p, d)) return -1;
    return real_statx(d, p, f, m, s);
}
