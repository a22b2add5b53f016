"""Fake Mesos agents for the fake master (tests/harness/fake_mesos.py).

Each agent really runs its tasks, as Mesos' command executor does: the
command (`sh -c value`, or `value` with `arguments` as argv when `shell`
is false) starts in the task's sandbox with CommandInfo's environment and
MESOS_SANDBOX/MESOS_TASK_ID; TASK_STARTING, TASK_RUNNING, then
TASK_FINISHED or TASK_FAILED with the executor's message ("Command exited
with status 3"), or TASK_KILLED after a kill (SIGTERM to the process
group, SIGKILL when the grace period ends).

Status updates follow Mesos' status update manager: per task they queue in
order and only the oldest unacknowledged one is sent to the master, again
every `retry_secs` until acknowledged; its acknowledgement releases the
next.  (Mesos backs off from 10 s to 10 min; the fake retries at a fixed,
short interval.)

Sandboxes are served as a Mesos agent serves them, on the agent's own
port: /files/browse, /files/read and /files/download, under the virtual
path /frameworks/<framework>/executors/<task id>/runs/latest.

Every method runs under the master's lock (the agent has no lock of its own).
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

Json = dict[str, Any]
TERMINAL = frozenset({"TASK_FINISHED", "TASK_FAILED", "TASK_KILLED", "TASK_ERROR", "TASK_LOST",
                      "TASK_DROPPED", "TASK_GONE", "TASK_GONE_BY_OPERATOR"})
#: (agent, task id, latest state, update to send or None): how an agent tells the master
#: a task's latest state (Mesos' `latest_state`) and sends it the oldest unacknowledged update.
Forward = Callable[["FakeAgent", str, str, Json | None], None]


def new_uuid() -> str:
    """A status update uuid as Mesos' JSON carries it (16 random bytes, base64)."""
    return base64.b64encode(uuid.uuid4().bytes).decode()


def scalar(name: str, value: float, role: str = "*", revocable: bool = False) -> Json:
    """A SCALAR resource (reserved to `role` unless it is "*")."""
    return _resource({"name": name, "type": "SCALAR", "scalar": {"value": value}}, role, revocable)


def ranges(name: str, spans: tuple[tuple[int, int], ...], role: str = "*") -> Json:
    """A RANGES resource such as ports."""
    return _resource({"name": name, "type": "RANGES",
                      "ranges": {"range": [{"begin": b, "end": e} for b, e in spans]}}, role, False)


def _resource(res: Json, role: str, revocable: bool) -> Json:
    res["role"] = role
    if role != "*":
        res["reservations"] = [{"type": "STATIC", "role": role}]
    if revocable:
        res["revocable"] = {}
    return res


@dataclass(frozen=True)
class AgentSpec:
    """What one fake agent offers (resources for role "*" plus optional extras)."""

    hostname: str
    cpus: float = 4.0
    mem: float = 4096.0
    disk: float = 16384.0
    gpus: float = 0.0
    ports: tuple[tuple[int, int], ...] = ((31000, 31099),)
    attributes: tuple[tuple[str, str], ...] = (("rack", "r1"),)
    #: More resources, e.g. scalar("cpus", 2, role="peloton") or scalar("cpus", 1, revocable=True).
    extra: tuple[Json, ...] = field(default_factory=tuple)

    def resources(self) -> list[Json]:
        out = [scalar("cpus", self.cpus), scalar("mem", self.mem), scalar("disk", self.disk)]
        if self.gpus:
            out.append(scalar("gpus", self.gpus))
        if self.ports:
            out.append(ranges("ports", self.ports))
        return out + [json.loads(json.dumps(r)) for r in self.extra]


@dataclass
class _Task:
    info: Json
    framework_id: str
    sandbox: Path
    proc: subprocess.Popen[bytes] | None = None
    killed: bool = False
    ended: bool = False


class FakeAgent:
    """One agent: tasks as real processes, per-task update streams, a sandbox file server."""

    def __init__(self, spec: AgentSpec, number: int, root: Path, forward: Forward,
                 lock: threading.RLock, retry_secs: float) -> None:
        self.spec = spec
        self.agent_id = f"{uuid.uuid4()}-S{number}"
        self.root = root
        self.connected = True
        self._forward_cb = forward
        self._lock = lock
        self.retry_secs = retry_secs
        self.tasks: dict[str, _Task] = {}
        self._streams: dict[str, deque[Json]] = {}
        self._sent_at: dict[str, float] = {}
        self._files = ThreadingHTTPServer(("127.0.0.1", 0), _FilesHandler)
        self._files.daemon_threads = True
        self._files.agent = self  # type: ignore[attr-defined]
        threading.Thread(target=self._files.serve_forever, args=(0.05,), name=f"fake-agent-{spec.hostname}",
                         daemon=True).start()

    @property
    def port(self) -> int:
        return int(self._files.server_address[1])

    def info(self) -> Json:
        """AgentInfo, as offers and GET_AGENTS carry it."""
        return {"hostname": self.spec.hostname, "id": {"value": self.agent_id}, "port": self.port,
                "resources": self.spec.resources(), "attributes": [
                    {"name": k, "type": "TEXT", "text": {"value": v}} for k, v in self.spec.attributes]}

    # -- tasks ------------------------------------------------------------------------
    def launch(self, framework_id: str, info: Json) -> None:
        """Run a task's command in a fresh sandbox."""
        task_id = info["task_id"]["value"]
        sandbox = self.root / "frameworks" / framework_id / "executors" / task_id / "runs" / "latest"
        sandbox.mkdir(parents=True, exist_ok=True)
        task = self.tasks[task_id] = _Task(info, framework_id, sandbox)
        self._update(task_id, "TASK_STARTING")
        cmd = info.get("command", {})
        argv = (["/bin/sh", "-c", cmd.get("value", "")] if cmd.get("shell", True)
                else list(cmd.get("arguments") or [cmd.get("value", "")]))
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "MESOS_SANDBOX": str(sandbox),
               "MESOS_TASK_ID": task_id}
        env.update({v["name"]: v.get("value", "") for v in
                    cmd.get("environment", {}).get("variables", [])})
        try:
            with open(sandbox / "stdout", "wb") as out, open(sandbox / "stderr", "wb") as err:
                task.proc = subprocess.Popen(argv, cwd=sandbox, env=env, stdout=out, stderr=err,
                                             start_new_session=True,
                                             executable=None if cmd.get("shell", True)
                                             else cmd.get("value"))
        except OSError as exc:
            task.ended = True
            self._update(task_id, "TASK_FAILED", f"Failed to launch container: {exc}",
                         "REASON_CONTAINER_LAUNCH_FAILED")
            return
        self._update(task_id, "TASK_RUNNING")
        threading.Thread(target=self._reap, args=(task_id, task.proc), daemon=True).start()

    def _reap(self, task_id: str, proc: subprocess.Popen[bytes]) -> None:
        code = proc.wait()
        with self._lock:
            task = self.tasks[task_id]
            task.ended = True
            how = (f"exited with status {code}" if code >= 0
                   else f"terminated with signal {signal.strsignal(-code)}")
            state = ("TASK_KILLED" if task.killed else "TASK_FINISHED" if code == 0
                     else "TASK_FAILED")
            self._update(task_id, state, f"Command {how}")

    def kill(self, task_id: str, grace_secs: float) -> None:
        """SIGTERM the task's process group, SIGKILL after the grace period."""
        task = self.tasks.get(task_id)
        if task is None or task.ended or task.killed or task.proc is None:
            return
        task.killed = True
        _signal_group(task.proc.pid, signal.SIGTERM)
        timer = threading.Timer(grace_secs, _signal_group, (task.proc.pid, signal.SIGKILL))
        timer.daemon = True
        timer.start()

    def stop(self) -> None:
        """Kill every process and stop serving files."""
        for task in self.tasks.values():
            if task.proc is not None and not task.ended:
                _signal_group(task.proc.pid, signal.SIGKILL)
        self._files.shutdown()
        self._files.server_close()

    # -- the status update manager -------------------------------------------------------
    def _update(self, task_id: str, state: str, message: str = "", reason: str = "") -> None:
        status: Json = {"task_id": {"value": task_id}, "state": state, "source": "SOURCE_EXECUTOR",
                        "agent_id": {"value": self.agent_id}, "executor_id": {"value": task_id},
                        "timestamp": time.time(), "uuid": new_uuid()}
        if message:
            status["message"] = message
        if reason:
            status["reason"] = reason
        stream = self._streams.setdefault(task_id, deque())
        stream.append(status)
        if len(stream) == 1:
            self._send_head(task_id)
        elif self.connected:  # the master still learns the latest state
            self._forward_cb(self, task_id, state, None)

    def _send_head(self, task_id: str) -> None:
        stream = self._streams[task_id]
        self._sent_at[task_id] = time.monotonic()
        if self.connected:
            self._forward_cb(self, task_id, stream[-1]["state"], stream[0])

    def acknowledge(self, task_id: str, update_uuid: str) -> Json | None:
        """Release the next update; the acknowledged one, or None if it was not the oldest."""
        stream = self._streams.get(task_id)
        if not stream or stream[0]["uuid"] != update_uuid:
            return None
        acked = stream.popleft()
        if acked["state"] in TERMINAL:
            del self._streams[task_id]
        elif stream:
            self._send_head(task_id)
        return acked

    def retry(self, now: float) -> None:
        """Re-send every head left unacknowledged for `retry_secs`."""
        for task_id, stream in list(self._streams.items()):
            if stream and now - self._sent_at.get(task_id, 0.0) >= self.retry_secs:
                self._send_head(task_id)

    def pending(self) -> int:
        """Updates not yet acknowledged."""
        return sum(len(s) for s in self._streams.values())

    def sandbox_of(self, virtual: str) -> Path | None:
        """The real directory or file behind a /frameworks/... path (None if outside)."""
        rel = virtual.strip("/")
        if not rel.startswith("frameworks/"):
            return None
        path = (self.root / rel).resolve()
        return path if path.is_relative_to(self.root.resolve()) else None


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except OSError:
        pass


class _FilesHandler(BaseHTTPRequestHandler):
    """/files/browse, /files/read and /files/download of one agent."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        url = urlparse(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        agent: FakeAgent = self.server.agent  # type: ignore[attr-defined]
        path = agent.sandbox_of(query.get("path", ""))
        if path is None or not path.exists():
            return self._reply(404, b"", "text/plain")
        if url.path == "/files/browse":
            entries = [{"path": f"{query['path'].rstrip('/')}/{p.name}", "size": p.stat().st_size,
                        "mode": "drwxr-xr-x" if p.is_dir() else "-rw-r--r--", "nlink": 1,
                        "uid": "root", "gid": "root", "mtime": p.stat().st_mtime}
                       for p in sorted(path.iterdir())]
            return self._reply(200, json.dumps(entries).encode(), "application/json")
        data = path.read_bytes()
        if url.path == "/files/download":
            return self._reply(200, data, "application/octet-stream")
        if url.path == "/files/read":
            offset = int(query.get("offset", "0"))
            if offset < 0:
                return self._reply(200, json.dumps({"data": "", "offset": len(data)}).encode(),
                                   "application/json")
            chunk = data[offset:offset + int(query.get("length", str(len(data))))]
            text = chunk.decode("utf-8", "surrogateescape")
            return self._reply(200, json.dumps({"data": text, "offset": offset}).encode(),
                               "application/json")
        return self._reply(404, b"", "text/plain")

    def _reply(self, code: int, body: bytes, kind: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
