"""The README's compatibility tables match the code (regenerate with scripts/compat_table.py)."""

from __future__ import annotations

import subprocess
import sys

from tests.harness.procs import REPO


def test_readme_compat_tables_are_current() -> None:
    result = subprocess.run([sys.executable, "scripts/compat_table.py", "--check"], cwd=REPO,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
