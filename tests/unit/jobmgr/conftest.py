"""The deterministic job manager harness as a fixture (see harness.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.unit.jobmgr.harness import Harness


@pytest.fixture
def h() -> Iterator[Harness]:
    harness = Harness()
    try:
        yield harness
    finally:
        harness.close()
