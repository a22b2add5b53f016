"""Aurora's Thrift IDL (thrift/api.thrift) loaded once with thriftpy2.

thriftpy2 builds the structs at runtime, so they are untyped: everything
that crosses into the bridge from this module is `Any`, and the typed
boundary is the converters (atop/, ptoa/) and the handlers, which name what
they read.  The IDL is the repository's wire-identical copy; the
`PELOTON_AURORA_THRIFT` environment variable points elsewhere (an installed
copy) when the source tree is not next to this package.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import thriftpy2

_DEFAULT_IDL = Path(__file__).resolve().parents[1] / "thrift" / "api.thrift"
IDL_PATH = Path(os.environ.get("PELOTON_AURORA_THRIFT", str(_DEFAULT_IDL)))

#: The loaded module: `api.JobKey`, `api.Response`, `api.ResponseCode.OK`, ...
api: Any = thriftpy2.load(str(IDL_PATH), module_name="aurora_api_thrift")

#: AuroraAdmin extends AuroraSchedulerManager extends ReadOnlyScheduler: every method a
#: client may call is in its `thrift_services`, with `<method>_args` / `<method>_result`.
SERVICE: Any = api.AuroraAdmin

READ_ONLY_METHODS: frozenset[str] = frozenset(api.ReadOnlyScheduler.thrift_services)
MANAGER_METHODS: frozenset[str] = frozenset(api.AuroraSchedulerManager.thrift_services)
ALL_METHODS: frozenset[str] = frozenset(SERVICE.thrift_services)

#: Service names accepted in a YARPC `Rpc-Procedure: <Service>::<method>` header, with the
#: methods each serves (Peloton's bridge registered the two lower services only; we add Admin).
SERVICES: dict[str, frozenset[str]] = {
    "ReadOnlyScheduler": READ_ONLY_METHODS,
    "AuroraSchedulerManager": MANAGER_METHODS,
    "AuroraAdmin": ALL_METHODS,
}


def args_class(method: str) -> Any:
    """The generated `<method>_args` struct class."""
    return getattr(SERVICE, method + "_args")


def result_class(method: str) -> Any:
    """The generated `<method>_result` struct class."""
    return getattr(SERVICE, method + "_result")
