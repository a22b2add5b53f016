"""The README's "On Kubernetes" tour runs as written: `make k8s-up`'s script starts the control
plane, `peloton up --backend k8s:.k8s/scheduler.kubeconfig` runs on it, and the tour's block
deploys a service and lists its pods with kubectl.

The block runs in a folder laid out like the repository (`.venv`, `docs` linked, `.k8s` made by
the script), so its relative paths work verbatim; the CLI finds this cluster's free ports
through $JOBMGR_URL and friends, as in tests/e2e/test_readme_tour.py.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.cluster import UpCluster
from tests.harness.procs import REPO, OutputTail, stop

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]
BLOCK = re.compile(r"<!-- k8s-tour:begin -->\s*```sh\n(.*?)```\s*<!-- k8s-tour:end -->", re.S)


def test_the_kubernetes_tour_runs_as_written(tmp_path: Path) -> None:
    readme = (REPO / "README.md").read_text()
    match = BLOCK.search(readme)
    assert match, "README.md has no k8s-tour block"
    assert "make k8s-up" in readme and "--backend k8s:.k8s/scheduler.kubeconfig" in readme
    for name in (".venv", "docs"):
        (tmp_path / name).symlink_to(REPO / name)
    plane = subprocess.Popen([sys.executable, str(REPO / "scripts" / "k8s_up.py"), "--nodes", "3",
                              "--dir", str(tmp_path / ".k8s")], cwd=tmp_path, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             env={**os.environ, "PYTHONUNBUFFERED": "1"}, start_new_session=True)
    up: UpCluster | None = None
    try:
        OutputTail(plane).wait_for("press Ctrl-C to stop", 180)
        up = UpCluster(tmp_path / "up", agents=0,
                       extra=["--backend", f"k8s:{tmp_path / '.k8s' / 'scheduler.kubeconfig'}"])
        (tmp_path / "up").mkdir()
        up.start()
        env = {**os.environ, "JOBMGR_URL": f"127.0.0.1:{up.jobmgr_port}",
               "RESMGR_URL": f"127.0.0.1:{up.resmgr_port}",
               "HOSTMGR_URL": f"127.0.0.1:{up.hostmgr_port}"}
        result = subprocess.run(["bash", "-euo", "pipefail", "-c", match.group(1)], cwd=tmp_path,
                                env=env, capture_output=True, text=True, timeout=240)
        assert result.returncode == 0, result.stdout + result.stderr
        pods = [line for line in result.stdout.splitlines() if " Running " in line]
        assert len(pods) == 3, result.stdout
        assert all(re.search(r"\bnode-[0-2]\b", line) for line in pods), result.stdout
    finally:
        if up is not None:
            up.close()
        plane.send_signal(signal.SIGINT)
        stop(plane)
