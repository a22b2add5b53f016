"""Methods with no Peloton counterpart: answered INVALID_REQUEST naming the method.

Storage backups and recovery (Peloton's storage is its own database) and task
state forcing.  The answer is a Thrift Response, never an HTTP error: Aurora
clients retry transport errors for up to ten minutes.
"""

from __future__ import annotations

from typing import Any

from aurorabridge.handlers.context import BridgeContext, HandlerFn
from aurorabridge.responses import invalid_request

UNSUPPORTED = (
    "forceTaskState", "performBackup", "listBackups", "stageRecovery", "queryRecovery",
    "deleteRecoveryTasks", "commitRecovery", "unloadRecovery", "snapshot", "pruneTasks",
)


def _unsupported(method: str) -> HandlerFn:
    def handler(ctx: BridgeContext, args: Any) -> Any:
        return invalid_request(f"{method} is not supported by the Peloton Aurora bridge")

    return handler


HANDLERS: dict[str, HandlerFn] = {m: _unsupported(m) for m in UNSUPPORTED}
