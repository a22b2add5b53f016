"""Tests against the real control plane: the session-scoped `kube` fixture lives in tests/conftest.py
(one control plane per run, shared with the other directories); this adds the first-use build.
"""

from __future__ import annotations

import pytest

from tests.harness.kube import cache_bin_dir, ensure_binaries


def pytest_collection_finish(session: pytest.Session) -> None:
    """Build the binaries before any test runs when a selected test uses the control plane.

    A first build takes minutes; inside the `kube` fixture it would count against the
    per-test timeout (pytest-timeout covers fixture setup).
    """
    if not any("kube" in getattr(item, "fixturenames", ()) for item in session.items):
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and not (cache_bin_dir() / "kube-apiserver").exists():
        reporter.write_line(f"building the Kubernetes test binaries into {cache_bin_dir()} "
                            "(scripts/k8s_binaries.sh, about 6 minutes, once)")
    ensure_binaries()
