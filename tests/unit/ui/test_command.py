"""`peloton ui` as its own process: serves the pages' API from the daemons it is pointed at."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import urllib.request

from tests.harness.procs import PELOTON, OutputTail, stop
from tests.unit.ui import fakes


def test_peloton_ui_serves_until_sigterm(fake_world: tuple[str, fakes.UiWorld]) -> None:
    address, _ = fake_world
    proc = subprocess.Popen([PELOTON, "ui", "--port", "0", "--jobmgr", address, "--resmgr", address,
                             "--hostmgr", address, "--refresh-ms", "5000"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"}, start_new_session=True)
    try:
        line = OutputTail(proc).wait_for("web UI at", 30)
        match = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        assert match, line
        base = match.group(0)
        with urllib.request.urlopen(base + "ui/api/pools", timeout=10) as response:
            paths = [p["path"] for p in json.loads(response.read())["pools"]]
        assert paths == ["/", "/DefaultResPool", "/DefaultResPool/batch"]
        with urllib.request.urlopen(base, timeout=10) as response:
            assert b'content="5000"' in response.read()
    finally:
        code = stop(proc, signal.SIGTERM, timeout=15)
    assert code == 0
