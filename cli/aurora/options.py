"""Arguments of the `aurora` command, parsed as Aurora's client parses them.

Job keys are `CLUSTER/ROLE/ENV/NAME`; instance specs add `/INSTANCES`
(`0`, `0-2`, `0,2-4`); task instances add `/INSTANCE`; `job list` and `job
status` take partial keys with shell wildcards; `quota get` takes
`CLUSTER/ROLE`.  `--bind name=value` binds a template variable of the config.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import click

from aurorabridge.client.loader import parse_binding
from aurorabridge.thrift_api import api

GOOD_IDENTIFIER = re.compile(r"^[\w\-\.]+$")
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True, order=True)
class JobKey:
    """An Aurora job key with its cluster."""

    cluster: str
    role: str
    env: str
    name: str

    def __str__(self) -> str:
        return f"{self.cluster}/{self.role}/{self.env}/{self.name}"

    def to_thrift(self) -> Any:
        """The Thrift JobKey (without the cluster)."""
        return api.JobKey(role=self.role, environment=self.env, name=self.name)

    @classmethod
    def from_thrift(cls, cluster: str, key: Any) -> JobKey:
        """A key of `cluster` from a Thrift JobKey."""
        return cls(cluster, key.role, key.environment, key.name)


def parse_job_key(text: str) -> JobKey:
    """CLUSTER/ROLE/ENV/NAME (ValueError naming what is wrong)."""
    parts = text.split("/")
    if len(parts) != 4:
        raise ValueError(f"Invalid job path '{text}': expected CLUSTER/ROLE/ENV/NAME")
    for label, part in zip(("role", "env", "name"), parts[1:], strict=True):
        if not GOOD_IDENTIFIER.match(part):
            raise ValueError(f"Invalid {label} '{part}'")
    return JobKey(*parts)


def parse_instances(text: str | None) -> list[int] | None:
    """`0,2-4` -> [0, 2, 3, 4]; empty -> None (all instances)."""
    if not text:
        return None
    found: set[int] = set()
    for part in text.split(","):
        bounds = part.split("-")
        start, end = int(bounds[0]), int(bounds[-1]) + 1
        if start >= end:
            raise ValueError(f"Invalid instance range: {part}")
        found.update(range(start, end))
    return sorted(found)


@dataclass(frozen=True)
class InstanceSpec:
    """A job key and its instances (None: all)."""

    key: JobKey
    instances: list[int] | None


class _Type(click.ParamType):  # type: ignore[type-arg]  # generic only in click >= 8.2
    parser: Callable[[str], Any]

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return value
        try:
            return type(self).parser(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


def _instance_spec(text: str) -> InstanceSpec:
    parts = text.split("/")
    if len(parts) == 4:
        return InstanceSpec(parse_job_key(text), None)
    if len(parts) != 5:
        raise ValueError("Instance specifier must be a CLUSTER/ROLE/ENV/JOB/INSTANCES tuple")
    return InstanceSpec(parse_job_key("/".join(parts[:4])), parse_instances(parts[4]))


def _task_instance(text: str) -> tuple[JobKey, int]:
    parts = text.split("/")
    if len(parts) != 5:
        raise ValueError(f"Task instance specifier {text} is not in the form "
                         "CLUSTER/ROLE/ENV/NAME/INSTANCE")
    key = parse_job_key("/".join(parts[:4]))
    try:
        return key, int(parts[4])
    except ValueError:
        raise ValueError(f"Instance must be an integer, but got {parts[4]}") from None


def _partial_key(text: str) -> tuple[str, str, str, str]:
    parts = text.split("/")
    if len(parts) > 4:
        raise ValueError("Job key must have no more than 4 segments")
    parts += ["*"] * (4 - len(parts))
    return parts[0], parts[1], parts[2], parts[3]


def _role(text: str) -> tuple[str, str]:
    parts = text.split("/")
    if len(parts) != 2:
        raise ValueError("Role argument must be a CLUSTER/NAME pair")
    return parts[0], parts[1]


def _make(name: str, parser: Callable[[str], Any]) -> Any:
    cls = type(name, (_Type,), {"name": name, "parser": staticmethod(parser)})
    return cls()


JOB_KEY = _make("CLUSTER/ROLE/ENV/NAME", parse_job_key)
INSTANCE_SPEC = _make("CLUSTER/ROLE/ENV/NAME[/INSTANCES]", _instance_spec)
TASK_INSTANCE = _make("CLUSTER/ROLE/ENV/NAME/INSTANCE", _task_instance)
PARTIAL_KEY = _make("cluster[/role[/env[/name]]]", _partial_key)
ROLE = _make("CLUSTER/ROLE", _role)
BINDING = _make("var=value", parse_binding)
INSTANCES = _make("inst,inst,...", parse_instances)


def bind_option(f: F) -> F:
    """--bind var=value (repeatable)."""
    return click.option("--bind", "bindings", type=BINDING, multiple=True, metavar="var=value",
                        help="Bind a pystachio variable name to a value. "
                        "Multiple flags may be used to specify multiple values.")(f)


def read_json_option(f: F) -> F:
    """--read-json."""
    return click.option("--read-json", is_flag=True,
                        help="Read job configuration in json format")(f)


def write_json_option(f: F) -> F:
    """--write-json."""
    return click.option("--write-json", is_flag=True,
                        help="Generate command output in JSON format")(f)


def open_browser_option(f: F) -> F:
    """--open-browser."""
    return click.option("--open-browser", is_flag=True,
                        help="Open browser to view job page after job is created")(f)


def message_option(f: F) -> F:
    """--message/-m."""
    return click.option("--message", "-m", default=None,
                        help="Message to include with the state transition")(f)


def config_option(f: F) -> F:
    """--config (an optional config file for commands that do not need one)."""
    return click.option("--config", default=None, metavar="pathname",
                        help="Pathname of the aurora configuration file containing the job "
                        "specification")(f)


def strict_option(f: F) -> F:
    """--strict."""
    return click.option("--strict", is_flag=True,
                        help="Check instances and generate an error for instance ranges in "
                        "parameters that are larger than the actual set of instances in the job")(f)
