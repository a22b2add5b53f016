"""Aurora API methods, one module per verb group, each a function `(ctx, args) -> Response`.

`handler_table(ctx)` binds them to a context and wraps each so a
PelotonError becomes the Response its ResponseCode mapping says
(responses.from_error) — handlers raise, they never build error codes.
Every AuroraAdmin method without a mapping answers INVALID_REQUEST naming
itself (unsupported.py), never an HTTP error: Aurora clients retry those.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aurorabridge.handlers import (
    cron,
    jobs,
    maintenance,
    quota_tiers,
    reconciliation,
    tasks,
    unsupported,
    update_queries,
    updates,
)
from aurorabridge.handlers.context import BridgeContext, HandlerFn
from aurorabridge.responses import from_error
from aurorabridge.thrift_api import ALL_METHODS
from peloton.core.errors import PelotonError

MODULES = (jobs, cron, tasks, updates, update_queries, quota_tiers, maintenance, reconciliation,
           unsupported)


def _bind(ctx: BridgeContext, method: str, fn: HandlerFn) -> Callable[[Any], Any]:
    def call(args: Any) -> Any:
        try:
            return fn(ctx, args)
        except PelotonError as exc:
            return from_error(exc, method)

    return call


def handler_table(ctx: BridgeContext) -> dict[str, Callable[[Any], Any]]:
    """Method name -> handler, for every method of AuroraAdmin."""
    table: dict[str, HandlerFn] = {}
    for module in MODULES:
        for name, fn in module.HANDLERS.items():
            if name in table:
                raise RuntimeError(f"{name} is handled twice")
            table[name] = fn
    missing = ALL_METHODS - table.keys()
    if missing:
        raise RuntimeError(f"no handler for {sorted(missing)}")
    return {name: _bind(ctx, name, fn) for name, fn in table.items()}
