"""The malloc arena cap: set through mallopt where glibc has it, never over an operator's
MALLOC_ARENA_MAX."""

from __future__ import annotations

import subprocess
import sys

import pytest

from peloton.common import mallocpolicy

PROBE = "from peloton.common import mallocpolicy; print(mallocpolicy.limit_arenas())"


def probe(env: dict[str, str]) -> str:
    return subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True,
                          text=True, check=True).stdout.strip()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_the_cap_is_set_in_a_fresh_process() -> None:
    assert probe({"PATH": "/usr/bin:/bin"}) == "True"


def test_an_operators_setting_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "8")
    assert mallocpolicy.limit_arenas() is False
    assert probe({"PATH": "/usr/bin:/bin", "MALLOC_ARENA_MAX": "8"}) == "False"
