"""Thermos task parsing and checks (peloton/core/thermos_spec.py), and the promise that the
spec, plan and runner modules stay shippable to a task's own python3."""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

import pytest

from peloton.core.thermos_spec import (
    DEFAULT_FINALIZATION_WAIT,
    ProcessSpec,
    TaskSpec,
    ThermosConfigError,
    parse_task,
)

REPO = Path(__file__).resolve().parents[3]
SHIPPED = [REPO / "peloton/core/thermos_spec.py", REPO / "peloton/core/thermos_plan.py",
           REPO / "aurorabridge/thermos_runner.py"]


def doc(*processes: dict[str, Any], **task: Any) -> dict[str, Any]:
    return {"environment": "devel", "task": {"name": "t", "processes": list(processes), **task}}


def test_defaults_are_thermos_defaults_and_the_doc_round_trips() -> None:
    spec = parse_task(doc({"name": "a", "cmdline": "echo a"}))
    assert spec == TaskSpec(processes=(ProcessSpec("a", "echo a"),))
    p = spec.processes[0]
    assert (p.max_failures, p.daemon, p.ephemeral, p.min_duration, p.final) == (1, False, False, 5.0, False)
    assert (spec.max_failures, spec.max_concurrency, spec.finalization_wait) == \
        (1, 0, DEFAULT_FINALIZATION_WAIT)
    full = parse_task(doc({"name": "a", "cmdline": "x", "max_failures": 0, "daemon": True,
                           "min_duration": 0.5},
                          {"name": "b", "cmdline": "y", "final": True},
                          {"name": "c", "cmdline": "z", "ephemeral": True, "final": True},
                          constraints=[{"order": ["b", "c"]}, {"order": ["zz"]}],
                          max_failures=3, max_concurrency=2, finalization_wait=10, user="www"))
    assert full.orders == (("b", "c"),)  # an order naming no process of the task is ignored
    assert parse_task(full.to_doc()) == full
    assert parse_task({"processes": [{"name": "a", "cmdline": "x"}]}).processes[0].name == "a"


@pytest.mark.parametrize(("document", "field", "words"), [
    ([], "task", "not a JSON object"),
    (doc(), "task.processes", "no processes"),
    (doc({"name": "a"}), "task.processes[0].cmdline", "no cmdline"),
    (doc({"name": "../x", "cmdline": "x"}), "task.processes[0].name", "valid file name"),
    (doc({"name": ".hidden", "cmdline": "x"}), "task.processes[0].name", "valid file name"),
    (doc({"name": "a", "cmdline": "x"}, {"name": "a", "cmdline": "y"}), "task.processes", "unique"),
    (doc({"name": "a", "cmdline": "x", "max_failures": -1}), "task.processes[0].max_failures", ">= 0"),
    (doc({"name": "a", "cmdline": "x", "max_failures": 1.5}), "task.processes[0].max_failures",
     "whole number"),
    (doc({"name": "a", "cmdline": "x", "min_duration": "5"}), "task.processes[0].min_duration", "number"),
    (doc({"name": "a", "cmdline": "x", "daemon": 1}), "task.processes[0].daemon", "true or false"),
    (doc({"name": "a", "cmdline": "x"}, max_concurrency=True), "task.max_concurrency", "whole number"),
    (doc({"name": "a", "cmdline": "x"}, finalization_wait=-1), "task.finalization_wait", ">= 0"),
    (doc({"name": "a", "cmdline": "x"}, constraints=[{"order": "a"}]), "task.constraints[0].order",
     "list of process names"),
    (doc({"name": "a", "cmdline": "x"}, constraints=[{"order": ["a", "b"]}]),
     "task.constraints[0].order", "unknown processes ['b']"),
    (doc({"name": "a", "cmdline": "x"}, {"name": "f", "cmdline": "y", "final": True},
         constraints=[{"order": ["a", "f"]}]), "task.constraints[0].order", "mixes final and regular"),
    (doc({"name": "d", "cmdline": "x", "daemon": True}, {"name": "b", "cmdline": "y"},
         constraints=[{"order": ["d", "b"]}]), "task.constraints[0].order", "daemon process d"),
    (doc({"name": "e", "cmdline": "x", "ephemeral": True}, {"name": "b", "cmdline": "y"},
         constraints=[{"order": ["e", "b"]}]), "task.constraints[0].order", "ephemeral process e"),
    (doc({"name": "a", "cmdline": "x"}, {"name": "b", "cmdline": "y"},
         constraints=[{"order": ["a", "b"]}, {"order": ["b", "a"]}]), "task.constraints", "cycle"),
])
def test_invalid_tasks_are_refused_naming_the_field(document: Any, field: str, words: str) -> None:
    with pytest.raises(ThermosConfigError, match=words.replace("[", r"\[").replace("]", r"\]")) as err:
        parse_task(document)
    assert err.value.field == field


def test_ephemeral_may_follow_ephemeral_and_a_process_may_follow_an_ephemeral_one_if_ephemeral() -> None:
    spec = parse_task(doc({"name": "e1", "cmdline": "x", "ephemeral": True},
                          {"name": "e2", "cmdline": "y", "ephemeral": True},
                          constraints=[{"order": ["e1", "e2"]}]))
    assert spec.orders == (("e1", "e2"),)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_modules_parse_as_python_3_8_and_import_only_the_standard_library(path: Path) -> None:
    tree = ast.parse(path.read_text(), feature_version=(3, 8))
    allowed = set(sys.stdlib_module_names) | {"peloton"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
            if node.module and node.module.startswith("peloton"):
                assert node.module in ("peloton.core", "peloton.core.thermos_spec"), node.module
        else:
            continue
        assert all(n.split(".")[0] in allowed for n in names), names
    source = path.read_text()
    for newer in ("match ", "zip(strict", "pairwise(", "removeprefix(", "slots=True", "StrEnum",
                  "functools.cache\n", "kw_only"):
        assert newer not in source, f"{path.name} uses {newer!r}, newer than Python 3.8"
