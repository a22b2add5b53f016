"""Load a `.aurora` file as Aurora's client does, and pick one job out of it.

The file is Python run in a namespace holding Pystachio's names, the schema
(aurorabridge/client/schema.py), the helpers and `include(path)`, which runs
another file (relative to the including one) in the same namespace.  What it
leaves in `jobs` are the jobs.  `--read-json` files hold `{"jobs": [...]}` (or
one job) in the JSON that `aurora job inspect --write-json` prints.

Errors name the file and line: a syntax error, or an exception raised while
the file runs (the innermost line of a config file in its traceback), with
the field when the exception is Pystachio's refusal of an unknown field.
"""

from __future__ import annotations

import difflib
import json
import os
import sys
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import pystachio
from pystachio import Ref

from aurorabridge.client import helpers, schema
from aurorabridge.client.errors import ConfigError, Problem
from aurorabridge.client.origins import also_record, recording

_HELPERS = ("order", "SimpleTask", "SequentialTask", "combine_tasks", "concat_tasks",
            "java_options", "python_options")


def namespace() -> dict[str, Any]:
    """The names a `.aurora` file sees (without `include`)."""
    names: dict[str, Any] = {n: getattr(pystachio, n) for n in dir(pystachio) if not n.startswith("_")}
    names.update({n: v for n, v in vars(schema).items() if not n.startswith("_") and n != "annotations"})
    names.update({n: getattr(helpers, n) for n in _HELPERS})
    return names


@dataclass
class Loaded:
    """A loaded config: its path, its jobs (Pystachio Job objects) and the files it ran."""

    path: str
    jobs: list[Any]
    files: list[str] = field(default_factory=list)
    environment: dict[str, Any] = field(default_factory=dict)


def _config_frame(tb: TracebackType | None, files: list[str]) -> int | None:
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename in files:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _config_file(tb: TracebackType | None, files: list[str], default: str) -> str:
    found = default
    while tb is not None:
        if tb.tb_frame.f_code.co_filename in files:
            found = tb.tb_frame.f_code.co_filename
        tb = tb.tb_next
    return found


def _unknown_field(exc: AttributeError, tb: TracebackType | None) -> tuple[str, str] | None:
    """(field, message) when `exc` is Pystachio refusing an unknown attribute of a struct."""
    text = str(exc)
    prefix = "Unknown schema attribute "
    if not text.startswith(prefix):
        return None
    attr = text[len(prefix):]
    owner = None
    while tb is not None:
        candidate = tb.tb_frame.f_locals.get("self")
        if candidate is not None and hasattr(candidate, "TYPEMAP"):
            owner = candidate
        tb = tb.tb_next
    if owner is None:
        return attr, "unknown field"
    name = type(owner).__name__
    close = difflib.get_close_matches(attr, list(owner.TYPEMAP), n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return f"{name}.{attr}", f"unknown field of {name}{hint}; fields: {', '.join(sorted(owner.TYPEMAP))}"


class _Runner:
    """Runs a config file and the files it includes in one namespace."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.files: list[str] = []
        self.stack: list[str] = []
        self.env = namespace()
        self.env["include"] = self.include

    def run(self, path: str) -> None:
        """Run the file at `path` in the namespace."""
        try:
            with open(path, encoding="utf-8") as fh:
                source = fh.read()
        except OSError as exc:
            raise ConfigError.one(path, None, "", f"cannot read the config: {exc.strerror or exc}") from None
        self.files.append(path)
        self.stack.append(path)
        also_record(path)
        try:
            code = compile(source, path, "exec")
            exec(code, self.env)
        finally:
            self.stack.pop()

    def include(self, name: str) -> None:
        """`include("other.aurora")`: run another file, relative to the including file."""
        base = os.path.dirname(self.stack[-1]) if self.stack else ""
        target = os.path.normpath(os.path.join(base, name))
        if not os.path.isfile(target):
            raise FileNotFoundError(f"include({name!r}): no such file {target}")
        self.run(target)


def load(path: str) -> Loaded:
    """Run the `.aurora` file at `path`; ConfigError (file:line) if it fails or has no jobs."""
    path = os.path.abspath(path) if not os.path.isabs(path) else path
    runner = _Runner(path)
    try:
        with recording(path):
            runner.run(path)
    except ConfigError:
        raise
    except SyntaxError as exc:
        raise ConfigError.one(exc.filename or path, exc.lineno, "", f"syntax error: {exc.msg}") from None
    except Exception as exc:  # the config's own code failed: say where
        tb = sys.exc_info()[2]
        where = _config_file(tb, runner.files, path)
        line = _config_frame(tb, runner.files)
        unknown = _unknown_field(exc, tb) if isinstance(exc, AttributeError) else None
        if unknown is not None:
            raise ConfigError.one(where, line, unknown[0], unknown[1]) from None
        raise ConfigError.one(where, line, "", f"{type(exc).__name__}: {exc}") from None
    jobs = runner.env.get("jobs")
    if not isinstance(jobs, list | tuple) or not jobs:
        raise ConfigError.one(path, None, "jobs", "No job defined in this config! (the file must "
                              "leave a list of Job objects named `jobs`)")
    for i, job in enumerate(jobs):
        if not isinstance(job, schema.Job):
            raise ConfigError.one(path, None, f"jobs[{i}]", f"is not a Job but {type(job).__name__}")
    return Loaded(path, list(jobs), runner.files, runner.env)


def load_json(path: str) -> Loaded:
    """Read a JSON config (`--read-json`): `{"jobs": [...]}` or a single job."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise ConfigError.one(path, None, "", f"cannot read the config: {exc.strerror or exc}") from None
    return loads_json(text, path)


def loads_json(text: str, path: str = "<json>") -> Loaded:
    """Parse JSON config text (see load_json)."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        line = getattr(exc, "lineno", None)
        raise ConfigError.one(path, line, "", f"not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise ConfigError.one(path, 1, "", "a JSON config is an object with `jobs` or one job")
    docs = doc.get("jobs") if "jobs" in doc else [doc]
    if not isinstance(docs, list) or not docs:
        raise ConfigError.one(path, None, "jobs", "No job defined in this config!")
    jobs = []
    for i, item in enumerate(docs):
        try:
            jobs.append(schema.Job(item))
        except (AttributeError, ValueError, TypeError) as exc:
            unknown = _unknown_field(exc, sys.exc_info()[2]) if isinstance(exc, AttributeError) else None
            fld, msg = unknown if unknown else ("", str(exc))
            raise ConfigError.one(path, None, f"jobs[{i}]" + (f".{fld}" if fld else ""), msg) from None
    return Loaded(path, jobs, [path])


def parse_binding(text: str) -> dict[Any, str]:
    """A `--bind name=value` flag as a Pystachio binding (ValueError when malformed)."""
    name, sep, value = text.partition("=")
    if not sep:
        raise ValueError("Binding parameter must be formatted name=value")
    try:
        ref = Ref.from_address(name)
    except Ref.InvalidRefError as exc:
        raise ValueError(f"Could not parse binding parameter {text}: {exc}") from None
    return {ref: value}


def _text(value: Any) -> str:
    return "{MISSING}" if value is pystachio.Empty else str(value)


def candidates(jobs: list[Any]) -> str:
    """The job keys of `jobs`, one per line, as Aurora lists them."""
    keys = [f"  {_text(j.cluster())}/{_text(j.role())}/{_text(j.environment())}/{_text(j.name())}"
            for j in jobs]
    return "Candidates are:\n" + "\n".join(keys)


def pick(loaded: Loaded, name: str | None, bindings: list[dict[Any, str]] | None = None,
         cluster: str | None = None, role: str | None = None, env: str | None = None
         ) -> tuple[int, Any]:
    """(index, job) of the one job matching the key parts given (None matches anything),
    with `bindings` applied."""
    def bind(job: Any) -> Any:
        return job.bind(*bindings) if bindings else job

    jobs = [bind(j) for j in loaded.jobs]
    if name is None:
        if len(jobs) > 1:
            raise ConfigError.one(loaded.path, None, "jobs", "Configuration has multiple jobs but no "
                                  "job name specified!")
        return 0, jobs[0]

    def matches(job: Any) -> bool:
        return (_text(job.name()) == name and (cluster is None or _text(job.cluster()) == cluster)
                and (role is None or _text(job.role()) == role)
                and (env is None or _text(job.environment()) == env))

    found = [(i, j) for i, j in enumerate(jobs) if matches(j)]
    if len(found) == 1:
        return found[0]
    if not found:
        message = f"Could not find job {cluster or '*'}/{role or '*'}/{env or '*'}/{name}\n"
    else:
        message = "Multiple jobs match, please disambiguate by specifying a job key.\n"
    raise ConfigError([Problem(loaded.path, None, "jobs", message + candidates(jobs))])
