"""v1alpha AdminService: lock down parts of the job manager (`peloton.api.v1alpha.admin.svc`).

Peloton's components: `Read` and `Write` freeze the read or write APIs of
every job manager service (its api_lock middleware: methods named Get*,
Query*, List*, Browse* and the whole WatchService read; Create*, Delete*,
Start*, Stop*, Restart*, Refresh*, Update*, Pause*, Resume*, Rollback*,
Abort*, Replace*, Patch* write); `GoalStateEngine` stops the goal-state
engines (nothing is driven toward its goal until the lock is removed;
what they track is kept).  A locked call fails with UNAVAILABLE naming
the lock.  The check runs once per call: `ApiLock` is the CallHook the job
manager passes to `service_registry.register`.

`Kill` and `Launch` are Peloton's task life-cycle locks
(peloton/jobmgr/lifecycle_lock.py): while `Kill` is locked no run is killed
(the goal-state actions that would kill back off and try again; API calls
still record the goal; the refused kills are sent when the lock is
removed), while `Launch` is locked nothing is launched
(placed tasks wait in the resource manager) -- Peloton accepted `Launch`
without acting on it.  An unknown component is INVALID_ARGUMENT "unknown
component: <n>" and nothing is changed, as Peloton.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

from peloton.api.gen.peloton.api.v1alpha.admin.svc import admin_svc_pb2 as pb
from peloton.api.gen.peloton.api.v1alpha.admin.svc import admin_svc_pb2_grpc as pb_grpc
from peloton.core.errors import InvalidArgument, Unavailable
from peloton.jobmgr.goalstate.engines import GoalStateEngines
from peloton.jobmgr.lifecycle_lock import LifecycleGate

log = logging.getLogger(__name__)

#: Method-name prefixes of read and write APIs (Peloton's config/jobmgr api_lock lists).
READ_PREFIXES = ("Get", "Query", "List", "Browse")
WRITE_PREFIXES = ("Create", "Delete", "Start", "Stop", "Restart", "Refresh", "Update", "Pause",
                  "Resume", "Rollback", "Abort", "Replace", "Patch")
#: Services whose every method is a read.
READ_SERVICES = frozenset({"peloton.api.v1alpha.watch.svc.WatchService"})

_C = pb.Component


class ApiLock:
    """Which API kinds are locked down; a CallHook that refuses calls of a locked kind."""

    def __init__(self) -> None:
        self.read = False
        self.write = False

    @staticmethod
    def kind(where: str) -> str:
        """"read", "write" or "" for a `<service>/<method>` name."""
        service, _, method = where.rpartition("/")
        if service in READ_SERVICES or method.startswith(READ_PREFIXES):
            return "read"
        if method.startswith(WRITE_PREFIXES):
            return "write"
        return ""

    def check(self, where: str) -> None:
        """Raise Unavailable if `where` (`<service>/<method>`) is locked down."""
        if not self.read and not self.write:
            return
        kind = self.kind(where)
        if (kind == "read" and self.read) or (kind == "write" and self.write):
            component = "Read" if kind == "read" else "Write"
            raise Unavailable(f"All {kind} APIs are locked down (AdminService.Lockdown "
                              f"{component}); {where} refused until RemoveLockdown {component}")

    def unary(self, where: str, call: Callable[[], Any]) -> Any:
        """Refuse a locked-down call, else run it."""
        self.check(where)
        return call()

    def stream(self, where: str, call: Callable[[], Iterator[Any]]) -> Iterator[Any]:
        """Refuse a locked-down stream, else produce it."""
        self.check(where)
        return call()


class AdminServicer(pb_grpc.AdminServiceServicer):  # type: ignore[misc]
    """Lockdown and RemoveLockdown of job manager components."""

    def __init__(self, engines: GoalStateEngines, lock: ApiLock,
                 lifecycle: LifecycleGate) -> None:
        self.api = lock
        self.engines = engines
        self.lifecycle = lifecycle

    def _components(self, components: Any) -> list[int]:
        wanted = list(dict.fromkeys(int(c) for c in components))
        for c in wanted:
            if c not in _C.values():
                raise InvalidArgument(f"unknown component: {c}", field="components")
        return wanted

    def _set(self, component: int, locked: bool) -> None:
        if component == _C.Read:
            self.api.read = locked
        elif component == _C.Write:
            self.api.write = locked
        elif component == _C.Kill:
            if locked:
                self.lifecycle.lock_kill()
            else:
                self.lifecycle.unlock_kill()
        elif component == _C.Launch:
            self.lifecycle.launch_locked = locked
        elif locked:
            self.engines.lock()
        else:
            self.engines.unlock()

    def Lockdown(self, request: pb.LockdownRequest, context: Any) -> pb.LockdownResponse:
        out = pb.LockdownResponse()
        for component in self._components(request.components):
            self._set(component, True)
            out.successes.append(component)  # type: ignore[arg-type]
        log.warning("API lockdown: %s", [_C.Name(c) for c in out.successes])
        return out

    def RemoveLockdown(self, request: pb.RemoveLockdownRequest,
                       context: Any) -> pb.RemoveLockdownResponse:
        out = pb.RemoveLockdownResponse()
        for component in self._components(request.components):
            self._set(component, False)
            out.successes.append(component)  # type: ignore[arg-type]
        log.warning("API lockdown removed: %s", [_C.Name(c) for c in out.successes])
        return out
