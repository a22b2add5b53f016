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


class _Supervisor:
    def __init__(self, argv: list[str]) -> None:
        opts, rest = getopt.getopt(argv, "d:r:f:g:j:m:c:V:Rn:u:o:")
        o = dict(opts)
        if "-d" not in o or "-r" not in o or len(rest) < 2:
            raise SystemExit("usage: see supervisor.c")
        self.sandbox, self.run_id, self.fifo = o["-d"], o["-r"], o.get("-f", "")
        self.grace_ms = int(o.get("-g", "5000"))
        self.json, self.limit = o.get("-j"), int(o.get("-m", "0"))
        self.cgroup, self.cg_version, self.rlimit = o.get("-c", ""), o.get("-V", "1"), "-R" in o
        self.nofile, self.user = int(o.get("-n", "0")), o.get("-u", "")
        self.orphan_secs = int(o.get("-o", "0"))
        self.program, self.args = rest[0], rest[1:]

    def record(self, name: str, text: str) -> None:
        tmp = os.path.join(self.sandbox, "status.tmp")
        with open(tmp, "w") as f:
            f.write(text)
        os.rename(tmp, os.path.join(self.sandbox, name))

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
        os.makedirs(self.sandbox, exist_ok=True)
        dirfd = os.open(self.sandbox, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(dirfd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return 3
        append = os.O_WRONLY | os.O_CREAT | os.O_APPEND
        for fd, name, flags in ((0, "/dev/null", os.O_RDONLY),
                                (1, os.path.join(self.sandbox, "stdout"), append),
                                (2, os.path.join(self.sandbox, "stderr"), append)):
            new = os.open(name, flags, 0o644)
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
            return self.fail(_STAGES[stage], err, pid)
        self.record("run.json", f'{{"supervisor":{os.getpid()},"pid":{pid},"started":{started:.6f},'
                    f'"spec":{self.json or "null"}}}\n')
        self.notify(f"state=running run={self.run_id} supervisor={os.getpid()} pid={pid} "
                    f"started={started:.6f}\n")
        if os.path.exists(os.path.join(self.sandbox, "kill")):
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
                os.killpg(pid, signal.SIGKILL)
                kill_at = 0.0
            elif signo == signal.SIGCHLD:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done == pid:
                    break
            elif signo and not killed:
                killed = True
                try:
                    with open(os.path.join(self.sandbox, "kill")) as f:
                        grace = int(f.read() or grace)
                except (OSError, ValueError):
                    pass
                kill_at = time.time() + grace / 1000.0
                os.killpg(pid, signal.SIGTERM)
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
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
            fd = os.open(os.path.join(self.sandbox, "..", "..", "agent.lock"), os.O_RDONLY)
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
                uid, gid = (int(x) for x in self.user.split(":"))
                os.setgid(gid)
                os.setuid(uid)
            stage = 0
            signal.pthread_sigmask(signal.SIG_UNBLOCK, sigs)
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
            os._exit(_Supervisor(args).run())


def main() -> int:
    """Entry point: `--serve`, or supervise one run from the command line."""
    if sys.argv[1:] == ["--serve"]:
        return serve()
    return _Supervisor(sys.argv[1:]).run()


if __name__ == "__main__":
    raise SystemExit(main())
