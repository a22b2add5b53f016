"""An independent Aurora client: Apache Thrift's Python library + code from the Thrift compiler.

`generate(dest)` runs Debian's `thrift` compiler on our thrift/api.thrift
into `dest` (a temporary directory: generated code is never committed), with
the package prefix `apache_aurora_client.` so it cannot clash with anything
else called `gen`, and imports it.  `connect(url, protocol)` returns an
AuroraAdmin client speaking over THttpClient the way Aurora's clients do:

* "binary": TBinaryProtocol with Content-Type and Accept
  `application/vnd.apache.thrift.binary` (Aurora CLI >= 0.17);
  THttpClient also sends its own `application/x-thrift` first, so every
  binary call exercises the two-Content-Type case;
* "json": TJSONProtocol with THttpClient's default `application/x-thrift`
  (older Aurora CLIs, gorealis, Peloton's deploy tooling).

One shim: the generated structs define `__eq__` and no `__hash__`, so on
Python 3 they cannot be put in the Python sets that `set<struct>` fields
decode into.  Aurora's own client runs on Python 2, where such objects hash
by identity; `generate` restores exactly that, nothing else.
"""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from tests.harness.procs import REPO

PACKAGE = "apache_aurora_client"
BINARY = "application/vnd.apache.thrift.binary"


def compiler() -> str | None:
    """Path of the Thrift compiler, if installed."""
    return shutil.which("thrift")


def generate(dest: Path) -> tuple[ModuleType, ModuleType]:
    """Generate and import the client; returns (AuroraAdmin module, ttypes module)."""
    out = dest / PACKAGE
    out.mkdir(parents=True, exist_ok=True)
    thrift = compiler()
    if thrift is None:
        subprocess.run([str(REPO / "scripts" / "ensure_system_packages.sh")], check=True)
        thrift = compiler()
    assert thrift is not None, "the Thrift compiler (Debian thrift-compiler) is required"
    subprocess.run(
        [
            thrift,
            "--gen",
            f"py:package_prefix={PACKAGE}.",
            "-out",
            str(out),
            str(REPO / "thrift" / "api.thrift"),
        ],
        check=True,
        capture_output=True,
    )
    if str(dest) not in sys.path:
        sys.path.insert(0, str(dest))
    admin = importlib.import_module(f"{PACKAGE}.gen.apache.aurora.api.AuroraAdmin")
    ttypes = importlib.import_module(f"{PACKAGE}.gen.apache.aurora.api.ttypes")
    structs = [v for v in vars(ttypes).values() if isinstance(v, type) and hasattr(v, "thrift_spec")]
    for struct in structs:
        if vars(struct).get("__hash__", 0) is None:  # __eq__ without __hash__
            setattr(struct, "__hash__", object.__hash__)  # noqa: B010 - Python 2 semantics
    return admin, ttypes


def connect(admin: ModuleType, url: str, protocol: str) -> Any:
    """An AuroraAdmin.Client over HTTP in `protocol` ("binary" or "json")."""
    from thrift.protocol import TBinaryProtocol, TJSONProtocol  # type: ignore[import-untyped]
    from thrift.transport import THttpClient  # type: ignore[import-untyped]

    transport = THttpClient.THttpClient(url)
    transport.setTimeout(20_000)
    if protocol == "binary":
        transport.setCustomHeaders({"Content-Type": BINARY, "Accept": BINARY})
        proto: Any = TBinaryProtocol.TBinaryProtocol(transport)
    else:
        proto = TJSONProtocol.TJSONProtocol(transport)
    transport.open()
    return admin.Client(proto)
