"""The audit log: one JSON line per mutating call on any front (who, what, when, result).

    {"time": "2024-05-01T12:00:00.123Z", "who": "alice", "how": "password",
     "front": "grpc", "what": "peloton.api.v0.job.JobManager/Create",
     "target": "pool /team/batch", "result": "OK"}

Every refusal is recorded, reads included, on every front (gRPC, the Aurora
endpoint, the web UI), each by the one place that maps that front's errors:
`result` is the refusal (`PERMISSION_DENIED: ...`, `UNAUTHENTICATED: ...`,
`AUTH_FAILED: ...`), `who` the caller or `anonymous` (no credentials, wrong
ones, or the default user), `target` the job, pod, host or pool the call
names.  Lines go to a file (appended, mode 0600,
flushed per line) and to the `peloton.audit` logger.  Never logged: passwords,
tokens, request bodies.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from pathlib import Path

from peloton.common.auth.policy import Principal
from peloton.common.clock import SYSTEM_CLOCK, Clock

log = logging.getLogger("peloton.audit")
#: `who` of a caller that did not prove who it is.
ANONYMOUS = "anonymous"


def who_of(principal: Principal | None) -> str:
    """The audit log's `who` of a caller (None: authentication failed)."""
    if principal is None or (principal.method == "default" and not principal.name):
        return ANONYMOUS
    return principal.display


class AuditLog:
    """Appends audit records; `path` None logs them only."""

    def __init__(self, path: Path | None = None, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.path = path
        self._clock = clock
        self._lock = threading.Lock()
        self._fd = -1
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)

    def record(self, *, who: str, how: str, front: str, what: str, result: str,
               target: str = "") -> None:
        """Write one record (never raises: an audit failure is logged, the call goes on)."""
        now = self._clock.wall()
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"
        line = json.dumps({"time": stamp, "who": who, "how": how, "front": front, "what": what,
                           "target": target, "result": result[:500]}, separators=(",", ":"))
        log.info("%s", line)
        if self._fd < 0:
            return
        data = (line + "\n").encode("utf-8")
        try:
            with self._lock:
                os.write(self._fd, data)
        except OSError:
            log.exception("cannot write the audit log %s", self.path)

    def close(self) -> None:
        """Close the file."""
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
