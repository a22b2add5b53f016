"""`make test`'s shards (scripts/pytest_shards.py, tests/harness/shard_claims.py): every
collected test runs exactly once across the processes, module fixtures stay whole, a failure
in any shard fails the run, and a shard that loses tests is caught."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUNNER = ROOT / "scripts" / "pytest_shards.py"

MODULE = """\
import os, pytest
@pytest.fixture(scope="module")
def where():
    # One set-up per module and process: a module split across shards would show twice.
    with open(os.environ["SHARD_LOG"], "a") as out:
        out.write(f"{{__name__}} {{os.getpid()}}\\n")
    return os.getpid()
{tests}
"""


def suite(tmp_path: Path, modules: int, tests: int, failing: str = "") -> Path:
    """A throwaway suite of `modules` modules (in two directories) of `tests` tests each,
    found only through its own pytest.ini (so a shard that did not read the project's
    configuration, as when a stray path made /tmp its rootdir, collects none of them)."""
    (tmp_path / "suite").mkdir()
    (tmp_path / "suite" / "pytest.ini").write_text("[pytest]\npython_functions = check_*\n")
    for m in range(modules):
        folder = tmp_path / "suite" / ("a" if m % 2 else "b")
        folder.mkdir(parents=True, exist_ok=True)
        body = "".join(
            f"def check_{t}(where):\n    assert {'False' if f'm{m}t{t}' == failing else 'True'}\n"
            for t in range(tests))
        (folder / f"test_m{m}.py").write_text(MODULE.format(tests=body))
    return tmp_path / "suite"


def run(tmp_path: Path, folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SHARD_LOG": str(tmp_path / "setups.log")}
    return subprocess.run(
        [sys.executable, str(RUNNER), "--shards", "2", "--", "-q", "-p", "no:cacheprovider",
         *args],
        cwd=folder, env=env, capture_output=True, text=True, timeout=240)


@pytest.mark.timeout(300)
def test_every_test_runs_once_and_each_module_in_one_process(tmp_path: Path) -> None:
    folder = suite(tmp_path, modules=8, tests=5)
    done = run(tmp_path, folder)
    assert done.returncode == 0, done.stdout + done.stderr
    setups = (tmp_path / "setups.log").read_text().splitlines()
    modules = [line.split()[0] for line in setups]
    assert sorted(modules) == sorted(f"test_m{m}" for m in range(8)), setups
    passed = sum(int(word) for line in done.stdout.splitlines()
                 for word, after in zip(line.split(), line.split()[1:], strict=False)
                 if after.startswith("passed") and word.isdigit())
    assert passed == 40, done.stdout
    assert "tests run per shard" in done.stdout and "SHARDS:" not in done.stdout


@pytest.mark.timeout(300)
def test_a_failure_in_any_shard_fails_the_run(tmp_path: Path) -> None:
    # The failing test sits in the last module, which the second shard takes first.
    folder = suite(tmp_path, modules=4, tests=3, failing="m3t1")
    done = run(tmp_path, folder)
    assert done.returncode == 1, done.stdout
    assert "test_m3.py::check_1" in done.stdout and "1 failed" in done.stdout


def test_the_check_names_tests_run_by_no_shard_or_by_two(tmp_path: Path) -> None:
    sys.path.insert(0, str(RUNNER.parent))
    try:
        from pytest_shards import check_every_test_ran_once
    finally:
        sys.path.remove(str(RUNNER.parent))
    for i in range(2):
        (tmp_path / f"collected-{i}.txt").write_text("t::a\nt::b\nt::c\n")
    (tmp_path / "ran-0.txt").write_text("t::a\n")
    (tmp_path / "ran-1.txt").write_text("t::a\nt::b\n")
    problems = check_every_test_ran_once(tmp_path, 2)
    assert any("1 tests ran in no shard" in p and "t::c" in p for p in problems), problems
    assert any("1 tests ran in several shards" in p and "t::a" in p for p in problems), problems
    (tmp_path / "ran-1.txt").unlink()
    assert check_every_test_ran_once(tmp_path, 2) == [
        "shard records missing: ran-1.txt (a shard ended early)"]
