"""Two agents of one name on one machine (every `peloton up` names its agent after the host)
get parent cgroups of their own, so one stopping never removes the parent the other's tasks are
put under (seen in CI: a cluster's 100 tasks failed "cannot set up the memory cgroup" while
another cluster's agent of the same name released its parent)."""

from __future__ import annotations

from pathlib import Path

import pytest

from peloton.agent.isolation import detect


def test_same_named_agents_with_other_work_dirs_have_their_own_parent_cgroup(tmp_path: Path) -> None:
    first = detect("localhost", mode="auto", work_dir=tmp_path / "a")
    second = detect("localhost", mode="auto", work_dir=tmp_path / "b")
    try:
        if first.parent is None:
            pytest.skip("MEMORY ISOLATION: no writable cgroup memory controller on this machine")
        assert second.parent is not None and first.parent != second.parent
        again = detect("localhost", mode="auto", work_dir=tmp_path / "a")
        assert again.parent == first.parent  # a restarted agent finds the same parent
        first.release()
        assert not first.parent.exists() and second.parent.exists()
    finally:
        first.release()
        second.release()
