"""The supervisor protocol of supervisor.c, in Python: used only without a C compiler.

Same command line, same sandbox files, same records, same notification
pipe (see the header of peloton/agent/supervisor/supervisor.c).  It is
much slower per task (a Python process per supervisor), so the agent logs
loudly when it falls back to it.  Run as
`python -m peloton.agent.pysupervisor --serve` (spawner) or with the
single-run options.  Deliberately imports nothing from the daemon side, so
it starts fast and never under gevent.
"""

from __future__ import annotations

import ctypes
import fcntl
import getopt
import os
import resource
import signal
import struct
import sys
import time

_STAGES = ("exec", "cgroup", "rlimit", "sandbox", "user", "fork")
#: How often a running supervisor checks that its run can still be adopted (supervisor.c).
_CHECK_SECS = float(os.environ.get("PELOTON_SUPERVISOR_CHECK_SECS") or 10)
_PR_SET_CHILD_SUBREAPER = 36


def _set_subreaper() -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _children_of_self() -> list[int]:
    me, out = os.getpid(), []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                rest = f.read().rpartition(")")[2].split()
        except OSError:
            continue
        if len(rest) > 1 and rest[0] != "Z" and int(rest[1]) == me:
            out.append(int(name))
    return out


def _signal_task(leader: int, sig: int) -> None:
    """SIGNAL the task's group and every process re-parented to us (see supervisor.c)."""
    targets = [-leader] if leader > 0 else []
    for pid in targets + _children_of_self():
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def _reap(leader: int) -> int | None:
    """Reap every exited child; the leader's wait status if it was among them."""
    found = None
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return found
        if pid == 0:
            return found
        if pid == leader:
            found = status


def _sweep(leader: int) -> None:
    """Kill what the task left behind until no child of ours remains."""
    for round_ in range(2000):
        _signal_task(leader if round_ == 0 else 0, signal.SIGKILL)
        _reap(-1)
        if not _children_of_self():
            try:
                os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
        time.sleep(0.001)


def _drop_privileges(user: str, groups: str) -> None:
    """setgroups (exactly `groups`), setgid, setuid: as supervisor.c does."""
    if not user:
        return
    uid, gid = (int(x) for x in user.split(":"))
    os.setgroups([int(g) for g in groups.split(",") if g])
    os.setgid(gid)
    os.setuid(uid)


def _reset_signals() -> None:
    for sig in range(1, signal.NSIG):
        if sig in (signal.SIGKILL, signal.SIGSTOP):
            continue
        try:
            signal.signal(sig, signal.SIG_DFL)
        except (OSError, ValueError):
            pass
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    os.umask(0o022)


def _own_read(path: str) -> str | None:
    """A record's text if it is a regular file owned by us (never through a symlink)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if st.st_uid != os.geteuid() or st.st_mode & 0o170000 != 0o100000:
            return None
        return os.read(fd, 64).decode(errors="replace")
    finally:
        os.close(fd)


class _Supervisor:
    def __init__(self, argv: list[str]) -> None:
        opts, rest = getopt.getopt(argv, "d:r:f:g:j:m:c:V:Rn:u:o:l:G:xC:")
        o = dict(opts)
        self.exec_only = "-x" in o
        self.groups, self.cwd = o.get("-G", ""), o.get("-C", "")
        if self.exec_only:
            if "-u" not in o or len(rest) < 2:
                raise SystemExit("usage: see supervisor.c")
            o.setdefault("-d", "")
            o.setdefault("-r", "")
        elif "-d" not in o or "-r" not in o or len(rest) < 2:
            raise SystemExit("usage: see supervisor.c")
        self.sandbox, self.run_id, self.fifo = o["-d"], o["-r"], o.get("-f", "")
        self.grace_ms = int(o.get("-g", "5000"))
        self.json, self.limit = o.get("-j"), int(o.get("-m", "0"))
        self.cgroup, self.cg_version, self.rlimit = o.get("-c", ""), o.get("-V", "1"), "-R" in o
        self.nofile, self.user = int(o.get("-n", "0")), o.get("-u", "")
        self.orphan_secs = int(o.get("-o", "0"))
        self.agent_lock = o.get("-l") or os.path.join(self.sandbox, "..", "..", "agent.lock")
        self.program, self.args = rest[0], rest[1:]

    def record(self, name: str, text: str) -> None:
        tmp = os.path.join(self.sandbox, "status.tmp")
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.rename(tmp, os.path.join(self.sandbox, name))

    def exec_as(self) -> int:
        """-x: exec the program as the user (a command health check)."""
        try:
            if self.cwd:
                os.chdir(self.cwd)
            _drop_privileges(self.user, self.groups)
        except OSError as exc:
            print(f"peloton-supervisor: cannot become {self.user}: {exc}", file=sys.stderr)
            return 126
        _reset_signals()
        try:
            os.execvp(self.program, self.args)
        except OSError as exc:
            print(f"peloton-supervisor: cannot run {self.program}: {exc}", file=sys.stderr)
        return 127

    def notify(self, line: str) -> None:
        try:
            fd = os.open(self.fifo, os.O_WRONLY | os.O_NONBLOCK) if self.fifo else -1
        except OSError:
            return
        if fd >= 0:
            for _ in range(2000):
                try:
                    os.write(fd, line.encode())
                    break
                except BlockingIOError:
                    time.sleep(0.001)
            os.close(fd)

    def fail(self, stage: str, err: int, pid: int = 0) -> int:
        line = (f"state=failed run={self.run_id} supervisor={os.getpid()} pid={pid} "
                f"stage={stage} errno={err}\n")
        self.record("status.exit", line)
        self.notify(line)
        return 1

    def cg(self, name: str) -> str:
        return os.path.join(self.cgroup, name)

    def cg_oom(self) -> bool:
        name = "memory.events" if self.cg_version == "2" else "memory.oom_control"
        try:
            with open(self.cg(name)) as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value) > 0
        except OSError:
            pass
        return False

    def run(self) -> int:
        sigs = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD}
        signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
        try:
            os.setsid()
        except OSError:
            pass
        _set_subreaper()
        os.makedirs(self.sandbox, mode=0o700, exist_ok=True)
        dirfd = os.open(self.sandbox, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(dirfd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return 3
        gid = int(self.user.split(":")[1]) if self.user else -1
        as_root = bool(self.user) and os.geteuid() == 0
        if as_root:
            os.fchown(dirfd, 0, gid)
            os.fchmod(dirfd, 0o1770)
        else:
            os.fchmod(dirfd, 0o700)
        append = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW
        for fd, name, flags in ((0, "/dev/null", os.O_RDONLY),
                                (1, os.path.join(self.sandbox, "stdout"), append),
                                (2, os.path.join(self.sandbox, "stderr"), append)):
            new = os.open(name, flags, 0o640)
            if as_root and fd > 0:
                os.fchown(new, 0, gid)
                os.fchmod(new, 0o640)
            os.dup2(new, fd)
            os.close(new)
        if self.cgroup:
            try:
                os.makedirs(self.cgroup, exist_ok=True)
                limit = "memory.max" if self.cg_version == "2" else "memory.limit_in_bytes"
                with open(self.cg(limit), "w") as f:
                    f.write(str(self.limit))
            except OSError as exc:
                return self.fail("cgroup", exc.errno or 0)
        read_end, write_end = os.pipe()
        started = time.time()
        pid = os.fork()
        if pid == 0:
            self.child(write_end, sigs)
        os.close(write_end)
        report = os.read(read_end, 8)
        os.close(read_end)
        if report:
            stage, err = struct.unpack("=ii", report)
            os.waitpid(pid, 0)
            _sweep(0)
            return self.fail(_STAGES[stage], err, pid)
        self.record("run.json", f'{{"supervisor":{os.getpid()},"pid":{pid},"started":{started:.6f},'
                    f'"spec":{self.json or "null"}}}\n')
        self.notify(f"state=running run={self.run_id} supervisor={os.getpid()} pid={pid} "
                    f"started={started:.6f}\n")
        if _own_read(os.path.join(self.sandbox, "kill")) is not None:
            signal.raise_signal(signal.SIGTERM)
        status, killed, kill_at, grace = 0, False, 0.0, self.grace_ms
        orphaned, agentless = False, 0.0
        while True:
            timeout = max(0.0, kill_at - time.time()) if kill_at else _CHECK_SECS
            info = signal.sigtimedwait(sigs, timeout)
            signo = info.si_signo if info is not None else 0
            if info is None and not killed:
                orphaned, agentless = self.orphan(agentless)
                signo = signal.SIGTERM if orphaned else 0
            if info is None and kill_at:
                _signal_task(pid, signal.SIGKILL)
                kill_at = 0.0
            elif signo == signal.SIGCHLD:
                ended = _reap(pid)
                if ended is not None:
                    status = ended
                    break
            elif signo and not killed:
                killed = True
                try:
                    grace = int(_own_read(os.path.join(self.sandbox, "kill")) or grace)
                except ValueError:
                    pass
                kill_at = time.time() + grace / 1000.0
                _signal_task(pid, signal.SIGTERM)
        _sweep(pid)
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
        oom = self.cgroup != "" and self.cg_oom()
        if self.cgroup:
            try:
                os.rmdir(self.cgroup)
            except OSError:
                pass
        code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1
        line = (f"state=exited run={self.run_id} supervisor={os.getpid()} pid={pid} "
                f"started={started:.6f} finished={time.time():.6f} code={code} signal={sig} "
                f"oom={int(oom)} killed={int(killed)} grace_ms={grace} "
                f"orphaned={int(orphaned)}\n")
        self.record("status.exit", line)
        self.notify(line)
        return 0

    def orphan(self, since: float) -> tuple[bool, float]:
        """(the run can no longer be adopted, when the agent lock was first seen free)."""
        try:
            if os.stat(self.sandbox).st_nlink == 0:
                return True, since
        except OSError:
            return True, since  # the sandbox is gone
        if self.orphan_secs <= 0:
            return False, since
        held = False
        try:
            fd = os.open(self.agent_lock, os.O_RDONLY)
        except OSError:
            fd = -1
        if fd >= 0:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                held = True
            finally:
                os.close(fd)
        if held:
            return False, 0.0
        since = since or time.time()
        return time.time() - since >= self.orphan_secs, since

    def child(self, errfd: int, sigs: set[signal.Signals]) -> None:
        stage = 0
        try:
            os.setpgid(0, 0)
            if self.cgroup:
                stage = 1
                with open(self.cg("cgroup.procs"), "w") as f:
                    f.write(str(os.getpid()))
            stage = 2
            if self.rlimit and self.limit > 0:
                resource.setrlimit(resource.RLIMIT_AS, (self.limit, self.limit))
            if self.nofile > 0:
                resource.setrlimit(resource.RLIMIT_NOFILE, (self.nofile, self.nofile))
            stage = 3
            os.chdir(self.sandbox)
            if self.user:
                stage = 4
                _drop_privileges(self.user, self.groups)
            stage = 0
            _reset_signals()
            os.execvp(self.program, self.args)
        except OSError as exc:
            os.write(errfd, struct.pack("=ii", stage, exc.errno or 0))
        os._exit(127)


def serve() -> int:
    """The spawner: fork one supervisor per framed request on stdin."""
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    stdin = sys.stdin.buffer
    while True:
        head = stdin.read(4)
        if len(head) < 4:
            return 0
        payload = stdin.read(struct.unpack("=I", head)[0])
        parts = [p.decode() for p in payload.split(b"\0")]
        nargs, nenv = int(parts[0]), int(parts[1])
        args = parts[2:2 + nargs]
        env = dict(p.split("=", 1) for p in parts[2 + nargs:2 + nargs + nenv])
        if os.fork() == 0:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            os.environ.clear()
            os.environ.update(env)
            sup = _Supervisor(args)
            os._exit(sup.exec_as() if sup.exec_only else sup.run())


def main() -> int:
    """Entry point: `--serve`, or supervise one run from the command line."""
    if sys.argv[1:] == ["--serve"]:
        return serve()
    sup = _Supervisor(sys.argv[1:])
    return sup.exec_as() if sup.exec_only else sup.run()


if __name__ == "__main__":
    raise SystemExit(main())
