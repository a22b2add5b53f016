"""Every change to a job goes through the job aggregate (peloton/jobmgr/aggregate.py).

An AST walk over every other job manager module fails on:
* a call of a store write method (any method of the `Store` Protocol that is not a read,
  plus `get_max_job_config_version`, which allocates config versions) or of the group
  committer's `write_many`;
* an assignment to a cached job's fields (`runtime`, `spec`, `specs`, `update`, `counts`,
  or their private slots), including `job.specs[v] = ...` (a class's own `self.x` is not
  a job);
* a read or write of the aggregate's private members on anything but `self`.

The checker itself is tested on planted violations, so this test can fail.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from peloton.storage import Store
from peloton.storage.cron_store import CronJobStore

ROOT = Path(__file__).resolve().parents[3]
JOBMGR = ROOT / "peloton" / "jobmgr"
#: The one module allowed to write.
OWNER = JOBMGR / "aggregate.py"

_READS = ("get_", "query_", "count_", "scan_", "schema_", "close")
#: Cron schedules are an aggregate of their own, owned by peloton/jobmgr/cron.py (a cron run
#: creates and stops jobs through the job operations, like any API caller).
_NOT_JOBS = frozenset(name for name, _ in inspect.getmembers(CronJobStore,
                                                             predicate=inspect.isfunction))
#: Store methods that change stored state, found from the Protocol (a new one is covered).
STORE_WRITES = frozenset(
    name for name, _ in inspect.getmembers(Store, predicate=inspect.isfunction)
    if not name.startswith("_") and not name.startswith(_READS) and name not in _NOT_JOBS
) | {"get_max_job_config_version", "write_many"}
#: Fields of a cached job (public read-only properties and their slots).
JOB_FIELDS = frozenset({"runtime", "spec", "specs", "update", "counts", "_runtime", "_spec",
                        "_specs", "_update", "_tasks", "_counts", "_deps"})
#: Private members of the aggregate no other object may touch.
PRIVATE = frozenset({"_runtime", "_spec", "_specs", "_update", "_tasks", "_counts", "_deps",
                     "_put_task", "_set_runtime", "_tell_job", "_jobs"})


def _on_self(node: ast.Attribute) -> bool:
    """`self.x`: another class's own attribute, never a cached job's."""
    return isinstance(node.value, ast.Name) and node.value.id == "self"


def violations(source: str, filename: str = "<snippet>") -> list[str]:
    """Every place in `source` that changes a job behind the aggregate's back."""
    found: list[str] = []

    def where(node: ast.AST) -> str:
        return f"{filename}:{getattr(node, 'lineno', 0)}"

    def check_target(target: ast.expr) -> None:
        if isinstance(target, ast.Subscript):
            target = target.value
        if isinstance(target, ast.Attribute) and target.attr in JOB_FIELDS and not _on_self(target):
            found.append(f"{where(target)}: assigns a job's {target.attr!r}")
        elif isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                check_target(elt)

    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in STORE_WRITES:
            found.append(f"{where(node)}: calls store write {node.func.attr!r}")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                check_target(target)
        if isinstance(node, ast.Attribute) and node.attr in PRIVATE and not _on_self(node):
            found.append(f"{where(node)}: touches the aggregate's private {node.attr!r}")
    return found


def _modules() -> list[Path]:
    return sorted(p for p in JOBMGR.rglob("*.py") if p != OWNER)


def test_no_job_manager_module_but_the_aggregate_changes_a_job() -> None:
    assert len(_modules()) > 20  # the walk sees the package
    found = [v for path in _modules()
             for v in violations(path.read_text(), str(path.relative_to(ROOT)))]
    assert found == [], "\n".join(found)


def test_the_write_list_comes_from_the_store_protocol() -> None:
    assert {"update_job_runtime", "create_task_configs", "add_job_config", "create_update",
            "update_update", "add_workflow_event", "create_task_runtimes",
            "delete_task_runtimes", "write_task_runtimes", "add_pod_events", "create_job",
            "delete_job", "add_active_job", "delete_active_job"} <= STORE_WRITES
    assert not STORE_WRITES & {"get_job_runtime", "get_task_runtimes", "query_jobs"}


@pytest.mark.parametrize("snippet, complaint", [
    ("job.runtime = ctx.store.update_job_runtime(job.job_id, rt)", "update_job_runtime"),
    ("self.store.create_task_configs(job_id, 2, spec.default_task, {})", "create_task_configs"),
    ("version = store.get_max_job_config_version(job_id) + 1", "get_max_job_config_version"),
    ("s = self.cache\ns.deps.store.add_workflow_event(event)", "add_workflow_event"),
    ("self.committer.write_many(writes)", "write_many"),
    ("job.runtime = runtime", "'runtime'"),
    ("job.spec, job.update = spec, None", "'spec'"),
    ("job.specs[3] = spec", "'specs'"),
    ("x: object = 1\njob._runtime = x", "'_runtime'"),
    ("tasks = job._tasks", "private '_tasks'"),
    ("job._put_task(0, rt)", "private '_put_task'"),
])
def test_the_checker_finds_a_planted_violation(snippet: str, complaint: str) -> None:
    found = violations(snippet)
    assert found and any(complaint in v for v in found), found


def test_the_checker_passes_the_aggregates_way() -> None:
    ok = """
job.change_runtime(lambda rt: dataclasses.replace(rt, goal_state=goal))
new = job.new_config(spec)
job.write_tasks({0: change})
self.store.get_job_runtime(job_id)
self._update(request)
spec = self.spec
self.update = engine
"""
    assert violations(ok) == []


def test_a_planted_violation_in_a_module_fails_the_walk(tmp_path: Path) -> None:
    module = tmp_path / "rogue.py"
    module.write_text("def stop(ctx, job):\n    ctx.store.update_job_runtime(job.job_id, "
                      "job.runtime)\n")
    assert violations(module.read_text(), "rogue.py") == [
        "rogue.py:2: calls store write 'update_job_runtime'"]
