/*
 * peloton-supervisor: runs each task of the Peloton agent under a small
 * per-task supervisor (the role Mesos' executor plays), at a cost near one
 * fork/exec per task.
 *
 * Two modes:
 *
 *   peloton-supervisor --serve
 *     The spawner.  The agent starts one and writes launch requests to its
 *     stdin: a 4-byte native-endian length, then NUL-terminated strings:
 *     the number of arguments A, the number of environment entries E, the
 *     A supervisor arguments (as below, without the program name), then
 *     the E entries of the task's environment ("K=V").  For
 *     each request the spawner forks a supervisor -- a fork of this tiny
 *     process, no exec -- so a task costs one cheap fork plus its own
 *     fork/exec.  It exits when stdin closes (the agent went away); the
 *     supervisors it forked live on.
 *
 *   peloton-supervisor -d SANDBOX -r RUN_ID [-f FIFO] [-g GRACE_MS] [-j JSON]
 *                      [-m LIMIT_BYTES (-c CGROUP_DIR -V 1|2 | -R)]
 *                      [-n NOFILE] [-u UID:GID [-G GID,GID...]]
 *                      [-o ORPHAN_SECS [-l AGENT_LOCK]] -- PROGRAM ARGV0 ARG...
 *     Supervise one task directly (what each forked supervisor runs).
 *
 *   peloton-supervisor -x -u UID:GID [-G GID,...] [-C DIR] -- PROGRAM ARGV0 ARG...
 *     Drop to the user as a task would (groups, signals) and exec PROGRAM:
 *     how the agent runs a task's command health check as the task's user.
 *
 * Identity and isolation of the task (the child, before exec):
 *  - with -u it runs as UID:GID with exactly the supplementary groups of -G
 *    (none without it): setgroups, then setgid, then setuid, so it never
 *    keeps the agent's groups.  The agent computes the groups (getgrouplist)
 *    because a static binary cannot read NSS;
 *  - every signal disposition is reset to the default and the signal mask is
 *    emptied, whatever the agent had, and the umask is 022;
 *  - the supervisor is a child subreaper (PR_SET_CHILD_SUBREAPER): processes
 *    the task daemonizes (double fork, setsid) are re-parented to it instead
 *    of init, and are killed with the task: when the task's leader exits,
 *    its process group and then every remaining descendant get SIGKILL;
 *    a kill request sends SIGTERM to them all, then SIGKILL after the grace.
 *  - with -u and a root supervisor, the sandbox is owned by root with the
 *    task's group, mode 01770 (sticky): the task may create files in it but
 *    cannot replace or remove the supervisor's records, and other tasks
 *    cannot enter it.  Records are written and read with O_NOFOLLOW (a task
 *    cannot redirect them with a symlink) and a record not owned by the
 *    supervisor's user is ignored.
 *
 * Protocol (mirrored by peloton/agent/pysupervisor.py, read by
 * peloton/agent/sandbox.py):
 *  - The supervisor holds an exclusive flock on the sandbox directory for
 *    its whole life.  An agent that can take that lock knows the supervisor
 *    is gone; no pid files, so pid reuse cannot fool it.  A second
 *    supervisor for the same run finds the lock taken and exits, so a
 *    duplicate launch never runs a task twice.
 *  - Progress is recorded in two files, each written once and atomically
 *    (write status.tmp, rename):
 *      run.json     once the program was exec'd: {"supervisor":P,"pid":T,
 *                   "started":S,"spec":<the -j JSON, the agent's RunSpec>},
 *                   all an agent restarted after a crash needs to adopt it;
 *      status.exit  one line of key=value fields, once the task ended:
 *                     state=exited run=R supervisor=P pid=T started=S finished=F
 *                                  code=C signal=N oom=0|1 killed=0|1 grace_ms=G
 *                                  orphaned=0|1
 *                   or, if it never started:
 *                     state=failed run=R supervisor=P pid=T stage=S errno=E
 *                   (stage: exec, cgroup, rlimit, sandbox, user or fork).
 *    Files are few and never replaced because inodes are what costs here:
 *    a rename over a file frees one, and ext4 without a journal scans past
 *    every inode freed in the last 30 s on each allocation, so at a
 *    thousand tasks a second inode churn, not fork/exec, would set the pace.
 *    A sandbox costs five inodes: itself, stdout, stderr, run.json and
 *    status.exit.
 *  - Each event is also written to FIFO, the agent's notification pipe, as
 *    one key=value line (for the start: state=running run=R supervisor=P
 *    pid=T started=S; for the end: the status.exit line), when a reader
 *    exists.  One write of < PIPE_BUF bytes is atomic, and the
 *    agent drains many records per read().  If the agent is away the record
 *    stays in the sandbox for it to adopt.
 *  - SIGTERM/SIGINT/SIGHUP ask for a kill: TERM goes to the task's process
 *    group, SIGKILL follows after the grace period (SANDBOX/kill holds the
 *    grace in milliseconds when the agent wrote one, else -g).  The
 *    supervisor enforces the grace itself, so a kill completes even if the
 *    agent dies meanwhile.  A kill file present at start means the kill
 *    request raced the launch: the task is stopped at once.
 *
 *  - A task nobody can adopt does not live for ever: every check_secs the
 *    supervisor looks at its sandbox and its agent.  A sandbox directory that
 *    was deleted means no agent can ever adopt the run: it is stopped at once.
 *    With -o, an agent holds a flock on WORK_DIR/agent.lock (-l names it;
 *    SANDBOX/../.. by default, but a sandbox may live outside the work dir)
 *    while it runs; when nobody has held it for ORPHAN_SECS, the cluster is
 *    taken to be gone for good and the task is stopped.  Both stop it as a
 *    kill with the grace period and record orphaned=1.
 *
 * Signals are blocked and taken synchronously with sigtimedwait(): no
 * asynchronous handlers, so no async-signal-safety traps.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <grp.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

enum { MAX_GROUPS = 256 };

struct opts {
    const char *sandbox, *run_id, *fifo, *cgroup, *json, *cwd;
    long grace_ms;
    long long mem_limit;
    int cg_version, use_rlimit, exec_only;
    long nofile, uid, gid;
    long orphan_secs; /* stop the task after this long without an agent (0: never) */
    const char *agent_lock; /* the agent's lock file (default SANDBOX/../../agent.lock) */
    int ngroups;
    gid_t groups[MAX_GROUPS];
    char **argv; /* program, then its argv */
};

/* How often a running supervisor checks that its run can still be adopted
 * ($PELOTON_SUPERVISOR_CHECK_SECS, read by the spawner or a direct run, overrides). */
static long check_secs = 10;

static void read_check_secs(void)
{
    const char *v = getenv("PELOTON_SUPERVISOR_CHECK_SECS");
    if (v && atol(v) > 0)
        check_secs = atol(v);
}

static struct opts o;
static int dirfd_ = -1; /* the sandbox directory, flocked */

/* Steps that can fail, named in the failure record. */
enum { ST_EXEC, ST_CGROUP, ST_RLIMIT, ST_SANDBOX, ST_USER, ST_FORK };
static const char *const STAGES[] = { "exec", "cgroup", "rlimit", "sandbox", "user", "fork" };

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
}

/* Write a whole small file; 0, or -1 with errno set. */
static int write_file(int at, const char *path, const char *text, int flags)
{
    int fd = openat(at, path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW | flags, 0644);
    if (fd < 0)
        return -1;
    size_t len = strlen(text);
    ssize_t n = write(fd, text, len);
    int saved = errno;
    close(fd);
    if (n != (ssize_t)len) {
        errno = n < 0 ? saved : EIO;
        return -1;
    }
    return 0;
}

/* Read a small file into buf, NUL-terminated; bytes read or -1.  Never
 * follows a symlink; with `own`, a file not owned by our user reads as
 * absent (a task may create files in its sandbox, but not our records). */
static ssize_t read_file_as(int at, const char *path, char *buf, size_t size, int own)
{
    struct stat st;
    int fd = openat(at, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return -1;
    if (own && (fstat(fd, &st) < 0 || st.st_uid != geteuid() || !S_ISREG(st.st_mode))) {
        close(fd);
        errno = EPERM;
        return -1;
    }
    ssize_t n = read(fd, buf, size - 1);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    return n;
}

static ssize_t read_file(int at, const char *path, char *buf, size_t size)
{
    return read_file_as(at, path, buf, size, 0);
}

/* The start of the line after the one at p (or the terminating NUL). */
static char *next_line(char *p)
{
    char *nl = strchr(p, '\n');
    return nl ? nl + 1 : p + strlen(p);
}

/* Write the sandbox file `name` atomically (it never exists before).  The
 * temporary name is made fresh (O_EXCL after unlinking whatever a task may
 * have put there), so it is ours and no symlink. */
static void record(const char *name, const char *text)
{
    unlinkat(dirfd_, "status.tmp", 0);
    if (write_file(dirfd_, "status.tmp", text, O_CREAT | O_EXCL) == 0)
        renameat(dirfd_, "status.tmp", dirfd_, name);
    else
        fprintf(stderr, "peloton-supervisor: cannot write %s: %s\n", name, strerror(errno));
}

/* Tell the agent, if one is listening. */
static void notify(const char *line)
{
    if (!o.fifo)
        return;
    /* O_NONBLOCK: the open fails with ENXIO when no agent reads the pipe. */
    int fd = open(o.fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return;
    size_t len = strlen(line);
    /* A full pipe means a busy agent: wait for it up to ~2 s, then leave the
     * record to the agent's periodic sandbox scan. */
    for (int tries = 0; tries < 2000; tries++) {
        ssize_t n = write(fd, line, len);
        if (n == (ssize_t)len || (n < 0 && errno != EAGAIN && errno != EINTR))
            break;
        sleep_ms(1);
    }
    close(fd);
}

static void fail(int stage, int err, pid_t pid)
{
    char line[512];
    snprintf(line, sizeof line, "state=failed run=%s supervisor=%d pid=%d stage=%s errno=%d\n",
             o.run_id, (int)getpid(), (int)pid, STAGES[stage], err);
    fprintf(stderr, "peloton-supervisor: %s failed: %s\n", STAGES[stage], strerror(err));
    record("status.exit", line);
    notify(line);
}

static int cg_write(const char *file, const char *text)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", o.cgroup, file);
    return write_file(AT_FDCWD, path, text, 0);
}

/* Value of `key` in a "key value"-per-line cgroup file (memory.events,
 * memory.oom_control); -1 when absent. */
static long long cg_stat(const char *file, const char *key)
{
    char path[4096], buf[4096];
    snprintf(path, sizeof path, "%s/%s", o.cgroup, file);
    if (read_file(AT_FDCWD, path, buf, sizeof buf) <= 0)
        return -1;
    size_t klen = strlen(key);
    for (char *p = buf; *p; p = next_line(p))
        if (strncmp(p, key, klen) == 0 && p[klen] == ' ')
            return atoll(p + klen + 1);
    return -1;
}

static int cg_setup(void)
{
    char limit[32];
    if (mkdir(o.cgroup, 0755) < 0 && errno != EEXIST)
        return -1;
    snprintf(limit, sizeof limit, "%lld", o.mem_limit);
    if (cg_write(o.cg_version == 2 ? "memory.max" : "memory.limit_in_bytes", limit) < 0)
        return -1;
    /* Where swap is accounted, cap it too so a task cannot swap its way past
     * the limit; these files are absent on hosts without swap accounting. */
    if (o.cg_version == 2)
        cg_write("memory.swap.max", "0");
    else
        cg_write("memory.memsw.limit_in_bytes", limit);
    return 0;
}

/* Whether the task died of its memory limit; then kill whatever is left in
 * the cgroup (processes that left the task's group) and remove it. */
static int cg_teardown(int sig)
{
    int oom;
    if (o.cg_version == 2) {
        oom = cg_stat("memory.events", "oom_kill") > 0;
    } else {
        long long kills = cg_stat("memory.oom_control", "oom_kill");
        char path[4096], buf[64];
        snprintf(path, sizeof path, "%s/memory.failcnt", o.cgroup);
        /* Kernels before 4.13 have no oom_kill counter: a SIGKILL after the
         * limit was hit is the best evidence there. */
        oom = kills > 0 || (kills < 0 && sig == SIGKILL
                            && read_file(AT_FDCWD, path, buf, sizeof buf) > 0 && atoll(buf) > 0);
    }
    char path[4096], buf[4096];
    snprintf(path, sizeof path, "%s/cgroup.procs", o.cgroup);
    for (int tries = 0; tries < 1000 && read_file(AT_FDCWD, path, buf, sizeof buf) > 0; tries++) {
        for (char *p = buf; *p; p = next_line(p))
            kill((pid_t)atoi(p), SIGKILL);
        sleep_ms(1);
    }
    if (rmdir(o.cgroup) < 0 && errno != ENOENT)
        fprintf(stderr, "peloton-supervisor: cannot remove %s: %s\n", o.cgroup, strerror(errno));
    return oom;
}

/* Become the task's user: exactly the given groups, then the gid, then the
 * uid (setuid last: after it nothing else may change).  0, or -1 with errno. */
static int drop_privileges(void)
{
    if (o.uid < 0)
        return 0;
    if (setgroups((size_t)o.ngroups, o.groups) < 0 && (errno != EPERM || o.ngroups > 0))
        return -1;
    if (setgid((gid_t)o.gid) < 0 || setuid((uid_t)o.uid) < 0)
        return -1;
    /* Paranoia: a setuid that silently left root would keep every privilege. */
    if (o.uid != 0 && (setuid(0) == 0 || geteuid() == 0)) {
        errno = EPERM;
        return -1;
    }
    return 0;
}

/* What a freshly exec'd program expects: default dispositions, nothing
 * blocked, a usual umask (the agent runs with 077 for its own files). */
static void reset_signals(void)
{
    sigset_t none;
    for (int sig = 1; sig < NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            signal(sig, SIG_DFL);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    umask(022);
}

/* The forked task: isolate, exec.  A failed step is reported as {stage,
 * errno} through `errfd` (close-on-exec, so a successful exec reads as EOF). */
static void child(int errfd)
{
    int report[2] = { ST_EXEC, 0 };
    struct rlimit mem = { (rlim_t)o.mem_limit, (rlim_t)o.mem_limit };
    struct rlimit files = { (rlim_t)o.nofile, (rlim_t)o.nofile };
    char pid[32];

    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, 0);
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    if (o.cgroup && cg_write("cgroup.procs", pid) < 0)
        report[0] = ST_CGROUP;
    else if ((o.use_rlimit && o.mem_limit > 0 && setrlimit(RLIMIT_AS, &mem) < 0)
             || (o.nofile > 0 && setrlimit(RLIMIT_NOFILE, &files) < 0))
        report[0] = ST_RLIMIT;
    else if (fchdir(dirfd_) < 0)
        report[0] = ST_SANDBOX;
    else if (drop_privileges() < 0)
        report[0] = ST_USER;
    else {
        reset_signals();
        execvp(o.argv[0], o.argv + 1);
    }
    report[1] = errno;
    if (write(errfd, report, sizeof report) < 0) {
        /* nothing left to tell it with */
    }
    _exit(127);
}

/* Parse "G1,G2,..." into o.groups; -1 if malformed or too many. */
static int parse_groups(const char *text)
{
    o.ngroups = 0;
    for (const char *p = text; *p;) {
        char *end;
        long g = strtol(p, &end, 10);
        if (end == p || g < 0 || o.ngroups >= MAX_GROUPS)
            return -1;
        o.groups[o.ngroups++] = (gid_t)g;
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            return -1;
    }
    return 0;
}

/* Pids of our children, from /proc (the kernel here may lack
 * /proc/PID/task/TID/children); at most `max`; returns how many. */
static int children_of_self(pid_t *out, int max)
{
    DIR *proc = opendir("/proc");
    if (!proc)
        return 0;
    pid_t self = getpid();
    int n = 0;
    struct dirent *e;
    while (n < max && (e = readdir(proc)) != NULL) {
        char path[300], buf[512];
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        if (read_file(AT_FDCWD, path, buf, sizeof buf) <= 0)
            continue;
        char *close_paren = strrchr(buf, ')');
        int ppid = 0;
        char state = 0;
        if (close_paren && sscanf(close_paren + 1, " %c %d", &state, &ppid) == 2
            && ppid == self && state != 'Z')
            out[n++] = (pid_t)atoi(e->d_name);
    }
    closedir(proc);
    return n;
}

/* Reap every exited child; the task leader's status goes to *status.
 * Returns 1 if the leader was among them. */
static int reap(pid_t leader, int *status)
{
    int st, found = 0;
    pid_t w;
    while ((w = waitpid(-1, &st, WNOHANG)) > 0)
        if (w == leader) {
            *status = st;
            found = 1;
        }
    return found;
}

/* Send `sig` to the task's group and to every process re-parented to us
 * (what the task daemonized out of its group). */
static void signal_task(pid_t leader, int sig)
{
    pid_t kids[1024];
    if (leader > 0)
        kill(-leader, sig);
    int n = children_of_self(kids, 1024);
    for (int i = 0; i < n; i++)
        kill(kids[i], sig);
}

/* Whether we have no child at all, alive or not yet reaped.  We are the task's
 * subreaper, so every process it left (in its group or daemonized out of it)
 * is a child of ours or of one of them: none means nothing is left. */
static int childless(void)
{
    int ignored;
    return waitpid(-1, &ignored, WNOHANG) < 0 && errno == ECHILD;
}

/* Kill whatever the task left behind until no child of ours remains: each
 * round kills our children, whose own children are then re-parented to us
 * (we are a subreaper) and killed in the next round.  The /proc scan that
 * finds our children reads every process's stat file, so it runs only when
 * some child is left: a task that leaves nothing (the usual case) costs a
 * waitpid, not two scans of the machine's process table. */
static void sweep(pid_t leader)
{
    int ignored;
    if (leader > 0)
        kill(-leader, SIGKILL);
    for (int round = 0; round < 2000; round++) {
        reap(-1, &ignored);
        if (childless())
            return;
        signal_task(0, SIGKILL);
        reap(-1, &ignored);
        if (childless())
            return;
        sleep_ms(1);
    }
    fprintf(stderr, "peloton-supervisor: processes of run %s survive the kill\n", o.run_id);
}

/* Parse supervisor options; -1 on a usage error. */
static int parse(int argc, char **argv)
{
    int c;
    memset(&o, 0, sizeof o);
    o.grace_ms = 5000;
    o.uid = o.gid = -1;
    optind = 1;
    while ((c = getopt(argc, argv, "+d:r:f:g:j:m:c:V:Rn:u:o:l:G:xC:")) != -1) {
        switch (c) {
        case 'd': o.sandbox = optarg; break;
        case 'r': o.run_id = optarg; break;
        case 'f': o.fifo = optarg; break;
        case 'g': o.grace_ms = atol(optarg); break;
        case 'j': o.json = optarg; break;
        case 'm': o.mem_limit = atoll(optarg); break;
        case 'c': o.cgroup = optarg; break;
        case 'V': o.cg_version = atoi(optarg); break;
        case 'R': o.use_rlimit = 1; break;
        case 'n': o.nofile = atol(optarg); break;
        case 'o': o.orphan_secs = atol(optarg); break;
        case 'l': o.agent_lock = optarg; break;
        case 'u':
            if (sscanf(optarg, "%ld:%ld", &o.uid, &o.gid) != 2 || o.uid < 0 || o.gid < 0)
                return -1;
            break;
        case 'G':
            if (parse_groups(optarg) < 0)
                return -1;
            break;
        case 'x': o.exec_only = 1; break;
        case 'C': o.cwd = optarg; break;
        default: return -1;
        }
    }
    if (o.exec_only)
        return o.uid >= 0 && argc - optind >= 2 ? (o.argv = argv + optind, 0) : -1;
    if (!o.sandbox || !o.run_id || argc - optind < 2)
        return -1;
    o.argv = argv + optind;
    return 0;
}

/* Our stdio goes to the sandbox: the task inherits it, and our diagnostics
 * land in the task's stderr, where a user looks first. */
static int redirect(void)
{
    int flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW;
    int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
    int out = openat(dirfd_, "stdout", flags, 0640);
    int err = openat(dirfd_, "stderr", flags, 0640);
    if (in < 0 || out < 0 || err < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0)
        return -1;
    if (o.uid >= 0 && geteuid() == 0 && (fchown(out, 0, (gid_t)o.gid) < 0 || fchmod(out, 0640) < 0
                                         || fchown(err, 0, (gid_t)o.gid) < 0 || fchmod(err, 0640) < 0))
        return -1;
    close(in);
    close(out);
    close(err);
    return 0;
}

/* The sandbox: owned by root with the task's group, sticky (see the header),
 * when we switch users as root; private to the task's user otherwise. */
static int own_sandbox(void)
{
    if (o.uid >= 0 && geteuid() == 0)
        return fchown(dirfd_, 0, (gid_t)o.gid) < 0 || fchmod(dirfd_, 01770) < 0 ? -1 : 0;
    return fchmod(dirfd_, 0700);
}

/* -x: exec PROGRAM as the user (a command health check). */
static int exec_as(void)
{
    if ((o.cwd && chdir(o.cwd) < 0) || drop_privileges() < 0) {
        fprintf(stderr, "peloton-supervisor: cannot become %ld:%ld: %s\n", o.uid, o.gid,
                strerror(errno));
        return 126;
    }
    reset_signals();
    execvp(o.argv[0], o.argv + 1);
    fprintf(stderr, "peloton-supervisor: cannot run %s: %s\n", o.argv[0], strerror(errno));
    return 127;
}

/* Run one task to its end; the process exit status is for humans only. */
static int orphan(double *since);

static int supervise(void)
{
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGHUP);
    sigaddset(&mask, SIGCHLD);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    setsid(); /* survive the agent and its terminal; EPERM when already a leader is fine */
    /* Orphans of the task become our children, so nothing it starts outlives it. */
    prctl(PR_SET_CHILD_SUBREAPER, 1);

    /* We make the sandbox, not the agent: the agent's hot path creates no inode. */
    if (mkdir(o.sandbox, 0700) < 0 && errno != EEXIST) {
        fprintf(stderr, "peloton-supervisor: sandbox %s: %s\n", o.sandbox, strerror(errno));
        return 1;
    }
    dirfd_ = open(o.sandbox, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd_ < 0) {
        fprintf(stderr, "peloton-supervisor: sandbox %s: %s\n", o.sandbox, strerror(errno));
        return 1;
    }
    if (flock(dirfd_, LOCK_EX | LOCK_NB) < 0) {
        fprintf(stderr, "peloton-supervisor: run %s is already supervised\n", o.run_id);
        return 3;
    }
    if (own_sandbox() < 0 || redirect() < 0) {
        fail(ST_SANDBOX, errno, 0);
        return 1;
    }
    if (o.cgroup && cg_setup() < 0) {
        fail(ST_CGROUP, errno, 0);
        return 1;
    }
    int pipefd[2];
    pid_t pid = -1;
    if (pipe2(pipefd, O_CLOEXEC) < 0 || (pid = fork()) < 0) {
        fail(ST_FORK, errno, 0);
        return 1;
    }
    double started = now();
    if (pid == 0)
        child(pipefd[1]);
    setpgid(pid, pid); /* also here, so a kill never finds the group missing */
    close(pipefd[1]);
    int report[2] = { ST_EXEC, 0 };
    ssize_t got;
    while ((got = read(pipefd[0], report, sizeof report)) < 0 && errno == EINTR) {
    }
    close(pipefd[0]);

    char line[512];
    int status = 0;
    if (got > 0) {
        waitpid(pid, &status, 0);
        sweep(0);
        if (o.cgroup)
            cg_teardown(0);
        fail(report[0] >= ST_EXEC && report[0] <= ST_FORK ? report[0] : ST_EXEC, report[1], pid);
        return 1;
    }
    size_t json_len = o.json ? strlen(o.json) : 4;
    char *run_json = malloc(json_len + 128);
    if (run_json) {
        snprintf(run_json, json_len + 128,
                 "{\"supervisor\":%d,\"pid\":%d,\"started\":%.6f,\"spec\":%s}\n",
                 (int)getpid(), (int)pid, started, o.json ? o.json : "null");
        record("run.json", run_json);
        free(run_json);
    }
    snprintf(line, sizeof line, "state=running run=%s supervisor=%d pid=%d started=%.6f\n",
             o.run_id, (int)getpid(), (int)pid, started);
    notify(line);

    char buf[32];
    int killed = 0, orphaned = 0;
    long grace = o.grace_ms;
    double kill_at = 0, agentless_since = 0;
    /* A kill that raced the launch left its file before we could be told. */
    if (read_file_as(dirfd_, "kill", buf, sizeof buf, 1) >= 0)
        raise(SIGTERM);
    for (;;) {
        siginfo_t info;
        struct timespec wait = { check_secs, 0 };
        if (kill_at > 0) {
            double left = kill_at - now();
            if (left <= 0) {
                signal_task(pid, SIGKILL);
                kill_at = 0;
                continue;
            }
            wait.tv_sec = (time_t)left;
            wait.tv_nsec = (long)((left - (double)wait.tv_sec) * 1e9);
        }
        int sig = sigtimedwait(&mask, &info, &wait);
        if (sig < 0 && errno == EAGAIN && !killed && orphan(&agentless_since)) {
            orphaned = 1;
            sig = SIGTERM; /* stop it as a kill request would */
        }
        if (sig == SIGCHLD) {
            /* Re-parented orphans end here too: reap them, watch for the leader. */
            if (reap(pid, &status))
                break;
        } else if (sig > 0 && !killed) {
            if (read_file_as(dirfd_, "kill", buf, sizeof buf, 1) > 0)
                grace = atol(buf);
            killed = 1;
            kill_at = now() + (grace > 0 ? grace : 0) / 1000.0 + 1e-6;
            signal_task(pid, SIGTERM);
        }
    }
    /* The task's leader is gone; so must be anything it left, in its group or
     * daemonized out of it. */
    sweep(pid);
    int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    int oom = o.cgroup ? cg_teardown(sig) : 0;
    snprintf(line, sizeof line,
             "state=exited run=%s supervisor=%d pid=%d started=%.6f finished=%.6f "
             "code=%d signal=%d oom=%d killed=%d grace_ms=%ld orphaned=%d\n",
             o.run_id, (int)getpid(), (int)pid, started, now(),
             WIFEXITED(status) ? WEXITSTATUS(status) : -1, sig, oom, killed, grace, orphaned);
    record("status.exit", line);
    notify(line);
    return 0;
}

/* Whether the run can no longer be adopted: its sandbox was deleted, or (with -o) no
 * agent has held the agent's lock for o.orphan_secs.  *since is when the lock was
 * first seen free (0 while an agent holds it). */
static int orphan(double *since)
{
    struct stat st;
    if (fstat(dirfd_, &st) == 0 && st.st_nlink == 0)
        return 1;
    if (o.orphan_secs <= 0)
        return 0;
    int fd = o.agent_lock ? open(o.agent_lock, O_RDONLY | O_CLOEXEC)
                          : openat(dirfd_, "../../agent.lock", O_RDONLY | O_CLOEXEC);
    int held = fd >= 0 && flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK;
    if (fd >= 0)
        close(fd); /* also drops our probe's lock, if we got it */
    if (held) {
        *since = 0;
        return 0;
    }
    if (*since == 0)
        *since = now();
    return now() - *since >= (double)o.orphan_secs;
}

/* Read exactly n bytes from stdin; 0 at a clean end of input, -1 otherwise. */
static int read_exact(char *buf, size_t n)
{
    size_t done = 0;
    while (done < n) {
        ssize_t got = read(0, buf + done, n - done);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return done == 0 && got == 0 ? 0 : -1;
        done += (size_t)got;
    }
    return 1;
}

/* Split a request into argv and envp vectors (pointers into buf); -1 if malformed. */
static int split(char *buf, size_t len, char **argv, char **envp, int max)
{
    char *p = buf, *end = buf + len;
    long nargs = strtol(p, NULL, 10);
    p += strlen(p) + 1;
    long nenv = p < end ? strtol(p, NULL, 10) : -1;
    p += p < end ? strlen(p) + 1 : 0;
    if (nargs < 0 || nenv < 0 || nargs > max - 2 || nenv > max - 1)
        return -1;
    argv[0] = "peloton-supervisor";
    for (long i = 0; i < nargs + nenv; i++) {
        if (p >= end)
            return -1;
        if (i < nargs)
            argv[i + 1] = p;
        else
            envp[i - nargs] = p;
        p += strlen(p) + 1;
    }
    argv[nargs + 1] = NULL;
    envp[nenv] = NULL;
    return (int)nargs + 1;
}

/* The spawner loop: one forked supervisor per request. */
static int serve(void)
{
    /* Supervisors are reaped by the kernel; each resets this before it
     * waits for its own task. */
    signal(SIGCHLD, SIG_IGN);
    for (;;) {
        uint32_t len;
        int r = read_exact((char *)&len, sizeof len);
        if (r <= 0)
            return r < 0;
        char *buf = len < (64u << 20) ? malloc((size_t)len + 2) : NULL;
        if (!buf || read_exact(buf, len) <= 0) {
            fprintf(stderr, "peloton-supervisor: bad request of %u bytes\n", len);
            return 1;
        }
        buf[len] = buf[len + 1] = '\0';
        pid_t pid = fork();
        if (pid == 0) {
            enum { MAX = 4096 };
            static char *argv[MAX], *envp[MAX];
            signal(SIGCHLD, SIG_DFL);
            int argc = split(buf, len, argv, envp, MAX);
            environ = envp;
            if (argc < 0 || parse(argc, argv) < 0) {
                fprintf(stderr, "peloton-supervisor: bad request for %s\n", o.run_id ? o.run_id : "?");
                _exit(2);
            }
            _exit(supervise());
        }
        if (pid < 0)
            fprintf(stderr, "peloton-supervisor: fork: %s\n", strerror(errno));
        free(buf);
    }
}

int main(int argc, char **argv)
{
    read_check_secs();
    if (argc == 2 && strcmp(argv[1], "--serve") == 0)
        return serve();
    if (parse(argc, argv) < 0) {
        fprintf(stderr, "usage: peloton-supervisor --serve\n"
                        "       peloton-supervisor -d SANDBOX -r RUN_ID [-f FIFO] [-g GRACE_MS] [-j JSON]\n"
                        "              [-m BYTES (-c CGROUP -V 1|2 | -R)] [-n NOFILE]\n"
                        "              [-u UID:GID [-G GID,...]] [-o ORPHAN_SECS [-l AGENT_LOCK]]\n"
                        "              -- PROGRAM ARGV0 ARG...\n"
                        "       peloton-supervisor -x -u UID:GID [-G GID,...] [-C DIR] -- PROGRAM ARGV0 ARG...\n");
        return 2;
    }
    return o.exec_only ? exec_as() : supervise();
}
