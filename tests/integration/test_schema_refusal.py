"""Daemons refuse a database whose schema is older than the code, naming the fix.

The store-level check has its own contract tests; these start the real
commands (`peloton up`, `peloton jobmgr`) against a SQLite file left one
migration behind, and then show that the named command is the whole fix.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.harness.procs import PELOTON, free_port


def _peloton(*args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PELOTON, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, check=False)


def _old_schema(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    assert _peloton("migrate", "schema", "up", "--store", url, cwd=tmp_path).returncode == 0
    down = _peloton("migrate", "schema", "down", "--store", url, cwd=tmp_path)
    assert down.returncode == 0, down.stderr
    status = _peloton("migrate", "schema", "status", "--store", url, cwd=tmp_path)
    assert status.returncode != 0                 # status says the schema is not current
    return url


def test_up_refuses_an_old_schema_and_names_the_command(tmp_path: Path) -> None:
    url = _old_schema(tmp_path)
    ports = [str(free_port()) for _ in range(3)]
    proc = _peloton("up", "--store", url, "--jobmgr-port", ports[0], "--resmgr-port", ports[1],
                    "--hostmgr-port", ports[2], "--aurora-port", "-1", "--ui-port", "-1",
                    "--agents", "0", cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert f"peloton migrate schema up --store {url}" in out
    assert "pending" in out
    assert "Traceback" not in out                 # a message for an operator, not a crash

    # The named command is the whole fix: afterwards the schema is current.
    assert _peloton("migrate", "schema", "up", "--store", url, cwd=tmp_path).returncode == 0
    assert _peloton("migrate", "schema", "status", "--store", url, cwd=tmp_path).returncode == 0


def test_jobmgr_process_refuses_an_old_schema(tmp_path: Path) -> None:
    url = _old_schema(tmp_path)
    config = tmp_path / "jobmgr.yaml"
    config.write_text(f"grpc:\n  host: 127.0.0.1\n  port: {free_port()}\n"
                      f"storage:\n  url: {url}\n  bootstrap: true\n")
    proc = _peloton("jobmgr", "--config", str(config), cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert f"peloton migrate schema up --store {url}" in out
    assert "Traceback" not in out
