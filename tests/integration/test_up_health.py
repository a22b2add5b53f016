"""`peloton up`: gRPC health and reflection, its defaults (SQLite under ./.peloton), the
addresses it prints, `--agents N`, `--store`, and clean stops on SIGTERM and Ctrl-C.

Every port is 0 (picked free by the daemons) or taken from a free-port probe, so these
tests cannot collide with a `make run` on the default ports of the same machine; the agents'
task ports are a block each test claims below the kernel's ephemeral range
(tests/harness/task_ports.py says why).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from peloton.api.client import PelotonClient
from tests.harness import task_ports
from tests.harness.procs import PELOTON, OutputTail, free_port, stop, wait_for

READY = "press Ctrl-C to stop"
#: "job manager   gRPC 127.0.0.1:PORT  (...)" and the like, as `peloton up` prints them.
ADDRESS = re.compile(r"^\s+(job manager|res\. manager|host manager)\s+gRPC (127\.0\.0\.1:\d+)")
AGENT = re.compile(r"^\s+agent\s+(\S+) gRPC (127\.0\.0\.1:\d+)\s+work dir (\S+)")
STORAGE = re.compile(r"^\s+storage\s+(\S+)")


class _TaskPorts:
    """The block of task ports the running test holds (set by `_task_ports`)."""

    base = 0


@pytest.fixture(autouse=True)
def _task_ports() -> Iterator[None]:
    """Claim this test's task port block for its duration."""
    block = task_ports.claim()
    _TaskPorts.base = block.base
    try:
        yield
    finally:
        block.release()


def up_args(*extra: str, jobmgr_port: int = 0) -> list[str]:
    """`peloton up` on free ports only (0: picked by the daemons), task ports in the
    test's claimed block."""
    first = _TaskPorts.base
    assert first, "no task port block claimed (the _task_ports fixture)"
    return [PELOTON, "up", "--jobmgr-port", str(jobmgr_port), "--resmgr-port", "0", "--hostmgr-port", "0",
            "--aurora-port", "0", "--ui-port", "0", "--agent-ports", f"{first}-{first + 999}",
            *extra]


def start_up(cwd: Path, *extra: str) -> tuple[subprocess.Popen[str], OutputTail]:
    proc = subprocess.Popen(up_args(*extra), cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    tail = OutputTail(proc)
    try:
        tail.wait_for(READY, timeout=60)
    except BaseException:
        stop(proc, signal.SIGTERM)
        raise
    return proc, tail


def printed(tail: OutputTail) -> tuple[dict[str, str], dict[str, str], str]:
    """(daemon -> address, agent name -> address, storage URL) from the banner."""
    daemons, agents, storage = {}, {}, ""
    for line in tail.lines:
        if m := ADDRESS.match(line):
            daemons[m.group(1)] = m.group(2)
        elif m := AGENT.match(line):
            agents[m.group(1)] = m.group(2)
        elif m := STORAGE.match(line):
            storage = m.group(1)
    return daemons, agents, storage


def serving(address: str) -> bool:
    host, _, port = address.rpartition(":")
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, int(port))) == 0


def pid_gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


def test_up_answers_health_and_stops_on_sigterm(tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.Popen(up_args(jobmgr_port=port), cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        OutputTail(proc).wait_for(f"127.0.0.1:{port}", timeout=30)
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            health = health_pb2_grpc.HealthStub(channel)
            reply = health.Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
            refl = reflection_pb2_grpc.ServerReflectionStub(channel)
            answers = list(refl.ServerReflectionInfo(
                iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5))
            names = {s.name for s in answers[0].list_services_response.service}
            assert "grpc.health.v1.Health" in names
    finally:
        code = stop(proc, signal.SIGTERM)
    assert code == 0


def test_up_with_two_agents_defaults_to_sqlite_in_dot_peloton_and_stops_on_ctrl_c(
        tmp_path: Path) -> None:
    proc, tail = start_up(tmp_path, "--agents", "2")
    try:
        daemons, agents, storage = printed(tail)
        assert set(daemons) == {"job manager", "res. manager", "host manager"}, tail.lines
        assert len(set(daemons.values())) == 3 and all(map(serving, daemons.values()))
        assert any(line.strip().startswith("aurora bridge HTTP http://127.0.0.1:")
                   for line in tail.lines)
        assert any(line.strip().startswith("web UI") for line in tail.lines)
        # The default store: a SQLite file under ./.peloton of the working directory.
        default_db = (tmp_path / ".peloton" / "state.db").resolve()
        assert storage == f"sqlite:///{default_db}"
        assert default_db.is_file() and default_db.stat().st_size > 0
        assert len(agents) == 2 and len(set(agents.values())) == 2, agents
        with PelotonClient(jobmgr=daemons["job manager"], resmgr=daemons["res. manager"],
                           hostmgr=daemons["host manager"], caller="up-test",
                           timeout=10) as client:
            def both_registered() -> bool:
                names = {h.hostname for h in client.query_hosts().host_infos}
                return names == set(agents)

            wait_for(both_registered, 30, "both agents in QueryHosts")
            assert set(agents) == {"localhost-0", "localhost-1"}
    except BaseException:
        stop(proc, signal.SIGTERM)
        raise
    code = stop(proc, signal.SIGINT, timeout=30)  # what Ctrl-C sends
    assert code == 0, tail.lines[-20:]
    assert tail.lines[-1] == "peloton up: stopped", tail.lines[-20:]
    wait_for(lambda: pid_gone(proc.pid), 5, "peloton up gone")
    assert not any(map(serving, daemons.values())), "a daemon still listens after Ctrl-C"

    explicit = tmp_path / "elsewhere" / "explicit.db"
    explicit.parent.mkdir()
    before = default_db.stat().st_mtime_ns, default_db.stat().st_size
    proc, tail = start_up(tmp_path, "--agents", "2", "--store", f"sqlite:///{explicit}")
    try:
        daemons, _, storage = printed(tail)
        assert storage == f"sqlite:///{explicit}"
        assert explicit.is_file() and explicit.stat().st_size > 0
        pool = tmp_path / "pool.yaml"
        pool.write_text("name: in-explicit-store\nowningteam: t\nresources:\n"
                        "- kind: cpu\n  reservation: 0\n  limit: 1\n  share: 1\npolicy: 1\n")
        made = subprocess.run([PELOTON, "-v", daemons["res. manager"], "respool", "create",
                               "/in-explicit-store", str(pool)], capture_output=True, text=True,
                              timeout=30)
        assert made.returncode == 0, made.stderr
    finally:
        code = stop(proc, signal.SIGINT, timeout=30)
    assert code == 0, tail.lines[-20:]
    assert b"in-explicit-store" in explicit.read_bytes(), "the pool must be in the --store file"
    assert b"in-explicit-store" not in default_db.read_bytes()
    assert (default_db.stat().st_mtime_ns, default_db.stat().st_size) == before, \
        "with --store, ./.peloton/state.db must not be used"


def _processes_under(base: Path, up_pid: int) -> list[str]:
    """Processes (other than this test) with a cwd or an open file under `base`, or in the
    session `peloton up` led: what a stopped cluster must not leave behind."""
    found = []
    root = str(base.resolve())
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        pid = int(entry.name)
        if pid_gone(pid):
            continue
        links = []
        try:
            links.append(str((entry / "cwd").readlink()))
            links.extend(str(fd.readlink()) for fd in (entry / "fd").iterdir())
        except OSError:
            pass
        try:
            session = os.getsid(pid)
        except OSError:
            session = -1
        if session == up_pid or any(link.startswith(root) for link in links):
            try:
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
            except OSError:
                cmd = "?"
            found.append(f"{pid} {cmd}")
    return found


def _run_sleepers(tmp_path: Path, tail: OutputTail, count: int = 2) -> dict[int, int]:
    """A pool and a batch job of `count` long sleeps, RUNNING; returns instance -> task pid."""
    import json

    daemons, _, _ = printed(tail)
    cli = [PELOTON, "-m", daemons["job manager"], "-v", daemons["res. manager"],
           "-u", daemons["host manager"]]
    pool, job = tmp_path / "pool.yaml", tmp_path / "sleep.yaml"
    pool.write_text("name: p\nowningteam: t\nresources:\n- kind: cpu\n  reservation: 1\n"
                    "  limit: 4\n  share: 1\n- kind: memory\n  reservation: 512\n  limit: 4096\n"
                    "  share: 1\npolicy: 1\n")
    job.write_text(f"name: sleepers\ninstancecount: {count}\ndefaultconfig:\n  resource:\n"
                   "    cpulimit: 0.1\n    memlimitmb: 32\n  command:\n    shell: true\n"
                   "    value: 'sleep 300'\n")
    for args in (["respool", "create", "/p", str(pool)], ["job", "create", "/p", str(job)]):
        done = subprocess.run([*cli, *args], capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr

    def pids() -> dict[int, int]:
        out = {}
        for record in tmp_path.rglob("sandboxes/*/run.json"):
            out[int(record.parent.name.rsplit("-", 2)[1])] = int(json.loads(
                record.read_text())["pid"])
        return out

    wait_for(lambda: len(pids()) == count and not any(map(pid_gone, pids().values())), 60,
             "every sleeper running")
    return pids()


def test_ctrl_c_stops_the_tasks_and_leaves_no_process_behind(tmp_path: Path) -> None:
    proc, tail = start_up(tmp_path)
    try:
        tasks = _run_sleepers(tmp_path, tail)
    except BaseException:
        stop(proc, signal.SIGTERM)
        raise
    code = stop(proc, signal.SIGINT, timeout=60)
    assert code == 0, tail.lines[-20:]
    assert tail.lines[-1] == "peloton up: stopped; 2 task(s) stopped", tail.lines[-5:]
    assert all(map(pid_gone, tasks.values()))
    wait_for(lambda: not _processes_under(tmp_path, proc.pid), 15,
             "no process of the cluster left")


def test_keep_tasks_leaves_them_for_the_next_start_to_adopt(tmp_path: Path) -> None:
    proc, tail = start_up(tmp_path, "--keep-tasks")
    try:
        tasks = _run_sleepers(tmp_path, tail, count=1)
    except BaseException:
        stop(proc, signal.SIGTERM)
        raise
    assert stop(proc, signal.SIGINT, timeout=60) == 0
    assert "1 task(s) left running for the next `peloton up`" in tail.lines[-1]
    assert not any(map(pid_gone, tasks.values())), "a kept task must survive"
    proc, tail = start_up(tmp_path)  # adopts it, then Ctrl-C stops it
    code = stop(proc, signal.SIGINT, timeout=60)
    assert code == 0 and tail.lines[-1] == "peloton up: stopped; 1 task(s) stopped", tail.lines[-5:]
    wait_for(lambda: all(map(pid_gone, tasks.values())), 15, "the adopted task stopped")
    wait_for(lambda: not _processes_under(tmp_path, proc.pid), 15, "no process left")
