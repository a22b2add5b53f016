"""Every change to a job goes through the job aggregate (peloton/jobmgr/aggregate.py).

An AST walk over every other job manager module, and the simulation package (which
builds and steps the daemons), fails on:
* a call of a store write method (any method of the `Store` Protocol that is not a read,
  plus `get_max_job_config_version`, which allocates config versions) or of the group
  committer's `write_many`, and any other reference to one: an alias
  (`w = store.update_job_runtime`), a `functools.partial`, the name as a string
  (`getattr(store, "update_job_runtime")`, `methodcaller(...)`);
* the group committer's writes (`write`, `submit`, `write_many`, `flush`) on a committer
  or an alias of one, and any use of the committer outside the composition root
  (app.py builds it, job_deps.py hands it to the aggregate);
* a `getattr` (or `attrgetter`, `methodcaller`, `setattr`) with a computed name on a
  store, a committer or the aggregate's dependencies;
* an assignment to a cached job's fields (`runtime`, `spec`, `specs`, `update`, `counts`,
  or their private slots), including `job.specs[v] = ...` (a class's own `self.x` is not
  a job);
* a read or write of the aggregate's private members on anything but `self`.

The checker itself is tested on planted violations, so this test can fail.  Readers
hold a `ReadOnlyStore` (peloton/storage/store.py), so mypy refuses the same writes by
type; a test below keeps the whole `Store` out of every module but the writers'.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from peloton.storage import GroupCommitter, ReadOnlyStore, Store
from peloton.storage.cluster_store import VolumeStore
from peloton.storage.cron_store import CronJobStore

ROOT = Path(__file__).resolve().parents[3]
JOBMGR = ROOT / "peloton" / "jobmgr"
SIMULATION = ROOT / "peloton" / "simulation"
#: The one module allowed to write.
OWNER = JOBMGR / "aggregate.py"

_READS = ("get_", "query_", "count_", "scan_", "schema_", "close")
#: Cron schedules are an aggregate of their own, owned by peloton/jobmgr/cron.py (a cron run
#: creates and stops jobs through the job operations, like any API caller).
#: Persistent-volume records likewise, owned by peloton/jobmgr/volumes.py.  Expiring pod
#: events past their retention is a cluster-wide chore of peloton/jobmgr/chores.py: it drops
#: history of no job's current state.
_NOT_JOBS = frozenset(name for store in (CronJobStore, VolumeStore)
                      for name, _ in inspect.getmembers(store, predicate=inspect.isfunction)
                      ) | {"expire_pod_events"}
#: Store methods that change stored state, found from the Protocol (a new one is covered).
STORE_WRITES = frozenset(
    name for name, _ in inspect.getmembers(Store, predicate=inspect.isfunction)
    if not name.startswith("_") and not name.startswith(_READS) and name not in _NOT_JOBS
) | {"get_max_job_config_version", "write_many"}
#: The group committer's methods that write (all but its lifecycle), found from the class.
COMMITTER_WRITES = frozenset(
    name for name, _ in inspect.getmembers(GroupCommitter, predicate=inspect.isfunction)
    if not name.startswith("_") and name not in {"start", "stop"})
#: Where the committer may be named at all: the composition root builds, starts and stops
#: it; the dependency record hands it to the aggregate.
COMMITTER_HOLDERS = frozenset({JOBMGR / "app.py", JOBMGR / "job_deps.py"})
#: Functions that reach an attribute of their first argument by a name given as a value
#: (and the dunder forms, called on the object).
_BY_NAME = frozenset({"getattr", "setattr", "delattr", "hasattr", "__getattribute__",
                      "__getattr__", "__setattr__"})
#: Names a receiver of a computed attribute must not have: a store, a committer, a job's
#: dependencies.
_WRITERS = ("store", "committer", "deps")
#: Fields of a cached job (public read-only properties and their slots).
JOB_FIELDS = frozenset({"runtime", "spec", "specs", "update", "counts", "_runtime", "_spec",
                        "_specs", "_update", "_tasks", "_counts", "_deps"})
#: Private members of the aggregate no other object may touch.
PRIVATE = frozenset({"_runtime", "_spec", "_specs", "_update", "_tasks", "_counts", "_deps",
                     "_put_task", "_set_runtime", "_tell_job", "_jobs"})


def _on_self(node: ast.Attribute) -> bool:
    """`self.x`: another class's own attribute, never a cached job's."""
    return isinstance(node.value, ast.Name) and node.value.id == "self"


def _dotted(node: ast.AST) -> str:
    """`a.b.c` of a name or attribute chain (calls and subscripts kept as `()`/`[]`)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Call):
        return f"{_dotted(node.func)}()"
    if isinstance(node, ast.Subscript):
        return f"{_dotted(node.value)}[]"
    return "?"


def _committer_aliases(tree: ast.AST) -> set[str]:
    """Names bound to a committer in a module (`c = jm.committer`, `c = GroupCommitter(s)`),
    found until none is added (an alias of an alias too)."""
    names: set[str] = set()
    while True:
        before = len(names)
        for node in ast.walk(tree):
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)):
                value = node.value
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if value is not None and _is_committer(value, names):
                    names |= {t.id for t in targets if isinstance(t, ast.Name)}
        if len(names) == before:
            return names


def _is_committer(node: ast.AST, aliases: set[str]) -> bool:
    if isinstance(node, ast.Call):
        node = node.func
    last = node.attr if isinstance(node, ast.Attribute) else \
        node.id if isinstance(node, ast.Name) else ""
    return "committer" in last.lower() or last in aliases


def violations(source: str, filename: str = "<snippet>", *,
               holds_committer: bool = False) -> list[str]:
    """Every place in `source` that changes a job behind the aggregate's back
    (`holds_committer`: the module may build and hand on the group committer)."""
    found: list[str] = []
    tree = ast.parse(source, filename)
    aliases = _committer_aliases(tree)
    called = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}

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

    def by_name(node: ast.Call) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else \
            func.id if isinstance(func, ast.Name) else ""
        if name in ("attrgetter", "methodcaller"):
            receiver, attr = None, node.args[0] if node.args else None
        elif name.startswith("__") and isinstance(func, ast.Attribute) and node.args:
            receiver, attr = func.value, node.args[0]
        elif name in _BY_NAME and len(node.args) >= 2:
            receiver, attr = node.args[0], node.args[1]
        else:
            return
        if attr is None or isinstance(attr, ast.Constant):
            return  # a constant name is checked as a string
        if receiver is None or any(w in _dotted(receiver).lower() for w in _WRITERS):
            what = "an object it is given later" if receiver is None else repr(_dotted(receiver))
            found.append(f"{where(node)}: {name} of a computed name on {what}")

    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in STORE_WRITES:
            found.append(f"{where(node)}: calls store write {node.func.attr!r}")
        elif isinstance(node, ast.Attribute) and node.attr in STORE_WRITES and \
                id(node) not in called:
            found.append(f"{where(node)}: reaches store write {node.attr!r} (an alias)")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                node.value in STORE_WRITES | PRIVATE | {"committer"}:
            found.append(f"{where(node)}: names {node.value!r} as a string (getattr and kin)")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                check_target(target)
        if isinstance(node, ast.Call):
            by_name(node)
        if isinstance(node, ast.Attribute) and node.attr in COMMITTER_WRITES and \
                _is_committer(node.value, aliases):
            found.append(f"{where(node)}: writes through the group committer "
                         f"({_dotted(node)!r})")
        elif not holds_committer and (
                (isinstance(node, ast.Attribute) and _is_committer(node, set())) or
                (isinstance(node, ast.Name) and _is_committer(node, set()))):
            found.append(f"{where(node)}: reaches the group committer ({_dotted(node)!r})")
        elif not holds_committer and isinstance(node, ast.alias) and \
                node.name == "GroupCommitter":
            found.append(f"{filename}: imports the group committer")
        if isinstance(node, ast.Attribute) and node.attr in PRIVATE and not _on_self(node):
            found.append(f"{where(node)}: touches the aggregate's private {node.attr!r}")
    return found


def _modules() -> list[Path]:
    return sorted(p for d in (JOBMGR, SIMULATION) for p in d.rglob("*.py") if p != OWNER)


def test_no_job_manager_module_but_the_aggregate_changes_a_job() -> None:
    assert len(_modules()) > 50  # the walk sees both packages
    assert any(p.parent == SIMULATION for p in _modules())
    found = [v for path in _modules()
             for v in violations(path.read_text(), str(path.relative_to(ROOT)),
                                 holds_committer=path in COMMITTER_HOLDERS)]
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
    # aliases, partials and names given as strings
    ("w = store.update_job_runtime\nw(job_id, rt)", "store write 'update_job_runtime' (an alias"),
    ("functools.partial(self.store.create_update, u)()", "'create_update' (an alias"),
    ("getattr(store, 'update_job_runtime')(job_id, rt)", "'update_job_runtime' as a string"),
    ("operator.methodcaller('add_active_job', job_id)(store)", "'add_active_job' as a string"),
    ("name = 'update_' + kind\ngetattr(self.cache.deps.store, name)(job_id, rt)",
     "getattr of a computed name on 'self.cache.deps.store'"),
    ("store.__getattribute__(name)(job_id, rt)", "computed name on 'store'"),
    ("operator.methodcaller(name, job_id)(store)", "methodcaller of a computed name"),
    ("tasks = getattr(job, '_tasks')", "'_tasks' as a string"),
    # the group committer
    ("self.cache.deps.committer.write(job_id, 0, rt)", "writes through the group committer"),
    ("jm.committer.submit(RuntimeWrite(job_id, 0, rt))", "writes through the group committer"),
    ("c = jm.committer\nd = c\nd.write(job_id, 0, rt)", "'d.write'"),
    ("GroupCommitter(store).write(job_id, 0, rt)", "writes through the group committer"),
    ("flush = deps.committer.flush\nflush()", "writes through the group committer"),
    ("from peloton.storage import GroupCommitter", "imports the group committer"),
    ("getattr(jm, 'committer').write(job_id, 0, rt)", "'committer' as a string"),
    ("c = self.cache.deps.committer", "reaches the group committer"),
])
def test_the_checker_finds_a_planted_violation(snippet: str, complaint: str) -> None:
    found = violations(snippet)
    assert found and any(complaint in v for v in found), found


def test_the_composition_root_builds_the_committer_but_never_writes_through_it() -> None:
    root = """
self.committer = GroupCommitter(store)
self.cache = JobCache(JobDeps(store, self.committer, self.queue, clock, Listeners()))
FunctionComponent("group-commit", self.committer.start, self.committer.stop)
"""
    assert violations(root, holds_committer=True) == []
    found = violations(root + "c = self.committer\nc.submit(w)\n", holds_committer=True)
    assert found == ["<snippet>:6: writes through the group committer ('c.submit')"]


def test_the_checker_passes_the_aggregates_way() -> None:
    ok = """
job.change_runtime(lambda rt: dataclasses.replace(rt, goal_state=goal))
new = job.new_config(spec)
job.write_tasks({0: change})
self.store.get_job_runtime(job_id)
self._update(request)
spec = self.spec
self.update = engine
value = getattr(spec, name)
forward = getattr(self._hosts, name)
out.write(text)
self.cluster.submit(spec, job_id)
if kind == "write": pass
"""
    assert violations(ok) == []


def test_a_planted_violation_in_a_module_fails_the_walk(tmp_path: Path) -> None:
    module = tmp_path / "rogue.py"
    module.write_text("def stop(ctx, job):\n    ctx.store.update_job_runtime(job.job_id, "
                      "job.runtime)\n")
    assert violations(module.read_text(), "rogue.py") == [
        "rogue.py:2: calls store write 'update_job_runtime'"]


# -- readers hold a read-only store ------------------------------------------------------
#: Modules that may hold the whole `Store`: the aggregate and what wires it, the volume
#: records' owner (an aggregate of its own, VolumeStore) and the simulation's composition
#: root.  Everything else reads through `ReadOnlyStore`.
STORE_HOLDERS = frozenset({OWNER, JOBMGR / "job_deps.py", JOBMGR / "app.py",
                           JOBMGR / "volumes.py", JOBMGR / "servicers" / "volumes.py",
                           SIMULATION / "daemons.py"})


def whole_store_uses(source: str, filename: str = "<snippet>") -> list[str]:
    """Where `source` imports or names the whole `Store` (a type that allows writes)."""
    return [f"{filename}:{getattr(node, 'lineno', 0)}: holds the whole Store"
            for node in ast.walk(ast.parse(source, filename))
            if (isinstance(node, ast.Name) and node.id == "Store") or
            (isinstance(node, ast.alias) and node.name == "Store")]


def test_readers_hold_a_read_only_store() -> None:
    found = [v for path in _modules() if path not in STORE_HOLDERS
             for v in whole_store_uses(path.read_text(), str(path.relative_to(ROOT)))]
    assert found == [], "\n".join(found)
    assert whole_store_uses("from peloton.storage import JobQuery, Store\n"
                            "def f(store: Store) -> None: ...\n") == [
        "<snippet>:1: holds the whole Store", "<snippet>:2: holds the whole Store"]


def test_the_read_only_store_has_every_read_and_no_write() -> None:
    members = {name for name, _ in inspect.getmembers(ReadOnlyStore, inspect.isfunction)
               if not name.startswith("_")}
    assert not members & STORE_WRITES
    assert {"get_job_config", "get_job_runtime", "query_jobs", "get_job_id_by_name",
            "get_active_jobs", "get_task_config", "get_task_runtimes", "get_pod_events",
            "get_update", "get_updates_for_job", "get_workflow_events"} <= members


def test_mypy_refuses_a_write_through_a_read_only_store(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from mypy import api

    snippet = tmp_path / "reader.py"
    snippet.write_text(
        "from peloton.core.model.job import JobRuntime\n"
        "from peloton.storage import ReadOnlyStore\n\n\n"
        "def stop(store: ReadOnlyStore, runtime: JobRuntime) -> None:\n"
        "    store.get_job_runtime('j')\n"
        "    store.update_job_runtime('j', runtime)\n")
    monkeypatch.chdir(ROOT)
    out, _, status = api.run(["--strict", "--no-incremental", "--follow-imports=silent",
                              str(snippet)])
    assert status == 1
    assert 'reader.py:7: error: "ReadOnlyStore" has no attribute "update_job_runtime"' in out
    assert out.count("error:") == 1, out
