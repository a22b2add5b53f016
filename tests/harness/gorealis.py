"""gorealis (PayPal's Go client for Aurora) as a test peer: build and run tests/gorealis.

tests/gorealis is a small Go module (go.mod and go.sum pin gorealis v1.25.0 and the Apache
Thrift Go library it is built with, v0.14.0, from the Go module proxy) whose program,
`realis-driver`, runs one Aurora workflow per call through gorealis's own API and monitors
and prints its observations as one JSON object (see tests/gorealis/main.go).

`make test` builds it into `.venv/bin/realis-driver` (the Makefile's `gorealis` target);
`driver()` builds it there too when it is missing or older than its sources, so a plain
`pytest` run works on a machine with Go.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.harness.procs import REPO

MODULE = REPO / "tests" / "gorealis"
BINARY = Path(sys.executable).with_name("realis-driver")


@dataclass(frozen=True)
class Outcome:
    """What one scenario run produced."""

    code: int
    observed: dict[str, Any]
    stderr: str

    @property
    def failure(self) -> str:
        """The driver's FAIL line(s), for assertion messages."""
        return "\n".join(line for line in self.stderr.splitlines() if "FAIL" in line) or self.stderr[-2000:]


def _stale() -> bool:
    if not BINARY.exists():
        return True
    built = BINARY.stat().st_mtime
    return any(p.stat().st_mtime > built for p in MODULE.iterdir() if p.suffix in (".go", ".mod", ".sum"))


def driver() -> Path:
    """The built driver (built now if missing or stale)."""
    if _stale():
        go = shutil.which("go")
        assert go is not None, "Go is required to build the gorealis driver (tests/gorealis)"
        subprocess.run([go, "build", "-o", str(BINARY), "."], cwd=MODULE, check=True,
                       capture_output=True, timeout=600)
    return BINARY


def run(url: str, transport: str, scenario: str, *, name: str, host: str = "",
        timeout_s: int = 90) -> Outcome:
    """Run `scenario` against the Aurora API at `url` in `transport` ("json" or "binary")."""
    args = [str(driver()), "-url", url, "-transport", transport, "-name", name,
            "-timeout", f"{timeout_s}s"]
    if host:
        args += ["-host", host]
    proc = subprocess.run([*args, scenario], capture_output=True, text=True, timeout=timeout_s * 6)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    observed = json.loads(lines[-1]) if lines else {}
    return Outcome(proc.returncode, observed, proc.stderr)
