"""Check a job before it is sent: every problem named with file:line and the field.

Three passes, all reported together:

* structure: every required field set, every value of its type, no template
  left unbound except those bound when the task runs (`{{mesos.instance}}`,
  `{{mesos.hostname}}`, `{{thermos.task_id}}`, `{{thermos.user}}`,
  `{{thermos.ports[name]}}`; they are bound to stand-ins for the check, as
  Aurora's client does);
* Aurora's rules on the values (job key identifiers, resources, process
  names and order, cron collision policy, constraints, static ports);
* the update config rules `aurora update start` applies.

The line is where the object holding the field was written
(aurorabridge/client/origins.py), else the job's own line.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from typing import Any

from pystachio import Empty, Ref
from pystachio.base import Object
from pystachio.choice import ChoiceContainer
from pystachio.composite import Structural
from pystachio.container import ListContainer
from pystachio.parsing import MustacheParser

from aurorabridge.client import schema
from aurorabridge.client.errors import ConfigError, Problem
from aurorabridge.client.origins import Origin, origin_of
from aurorabridge.thrift_api import api

GOOD_IDENTIFIER = re.compile(r"^[\w\-\.]+$")
PROCESS_NAME = re.compile(r"^[^./][^/]*$")
CRON_POLICIES = tuple(api.CronCollisionPolicy._NAMES_TO_VALUES)
MIN_PULSE_INTERVAL_SECS = 60
_PORTS = Ref.from_address("thermos.ports")
_STANDARD = {Ref.from_address("mesos.role"): "{{role}}", Ref.from_address("mesos.cluster"): "{{cluster}}",
             Ref.from_address("thermos.user"): "{{role}}"}


def standard_bindings(job: Any) -> Any:
    """Aurora's renamed templates: `{{mesos.role}}`, `{{mesos.cluster}}`, `{{thermos.user}}`."""
    return job.bind(_STANDARD)


def leaves(obj: Any, fld: str = "", origin: Origin | None = None
           ) -> Iterator[tuple[Any, str, Origin | None, str | None]]:
    """Every value of `obj` in its scope: (value, field path, origin, problem).  Structs, lists
    and struct choices are descended; a missing required field yields (None, path, origin,
    message); anything else is a leaf to check."""
    if isinstance(obj, Structural):
        origin = origin_of(obj) or origin
        scopes = obj.scopes()
        for name, signature in obj.TYPEMAP.items():
            value = obj._schema_data[name]
            if value is Empty:
                if signature.required:
                    yield None, f"{fld}.{name}", origin, f"is required ({type(obj).__name__}[{name}])"
                continue
            yield from leaves(value.in_scope(*scopes), f"{fld}.{name}", origin)
    elif isinstance(obj, ListContainer):
        scopes = obj.scopes()
        for i, element in enumerate(obj._values):
            yield from leaves(element.in_scope(*scopes), f"{fld}[{i}]", origin)
    elif isinstance(obj, ChoiceContainer) and isinstance(obj._value, Structural):
        if not any(isinstance(obj._value, choice) for choice in obj.CHOICES):
            names = ", ".join(c.__name__ for c in obj.CHOICES)
            yield None, fld, origin, f"is a {type(obj._value).__name__}; expected one of {names}"
            return
        yield from leaves(obj._value.in_scope(*obj.scopes()), fld, origin)
    else:
        yield obj, fld, origin, None


def port_names(obj: Any) -> set[str]:
    """Names of the `{{thermos.ports[name]}}` templates left in `obj`."""
    names = set()
    for leaf, _, _, _ in leaves(obj):
        if leaf is None:
            continue
        try:
            _, refs = leaf.interpolate()
        except (Object.CoercionError, MustacheParser.Uninterpolatable, ValueError):
            continue
        for ref in refs:
            sub = _PORTS.scoped_to(ref)
            if sub is not None and sub.is_index():
                names.add(str(sub.action().value))
    return names


def runtime_stand_ins(job: Any) -> Any:
    """`job` with the run-time templates bound to stand-in values, for checking."""
    ports = {name: 31337 for name in port_names(job)}
    thermos = schema.ThermosContext(task_id="check-task-id", user="check-user", ports=ports)
    return job.bind(mesos=schema.MesosContext(instance=31337, hostname="localhost"), thermos=thermos)


class _Walk:
    def __init__(self, default: Origin | None, path: str) -> None:
        self.default = default
        self.path = path
        self.problems: list[Problem] = []

    def add(self, origin: Origin | None, fld: str, message: str) -> None:
        """Record a problem at `origin` (else the job's own place)."""
        where = origin or self.default
        self.problems.append(Problem(where.path if where else self.path, where.line if where else None,
                                     fld, message))

    def visit(self, obj: Any, fld: str, origin: Origin | None) -> None:
        """Check every field of `obj`."""
        for leaf, path, where, problem in leaves(obj, fld, origin):
            if problem is not None:
                self.add(where, path, problem)
            else:
                self.leaf(leaf, path, where)

    def leaf(self, obj: Any, fld: str, origin: Origin | None) -> None:
        """Check one value: interpolable, no unbound template, of its type."""
        try:
            _, refs = obj.interpolate()
        except (Object.CoercionError, MustacheParser.Uninterpolatable, ValueError) as exc:
            self.add(origin, fld, str(exc))
            return
        if refs:
            names = ", ".join("{{" + str(r.address()) + "}}" for r in sorted(refs, key=str))
            self.add(origin, fld, f"unbound template variable {names} (bind it with .bind(), "
                     "--bind NAME=VALUE or a profile)")
            return
        check = obj.check()
        if not check.ok():
            self.add(origin, fld, check.message())


def _value(field: Any) -> Any:
    return None if field is Empty else field.get()


def _job_rules(job: Any, walk: _Walk, fld: str, origin: Origin | None) -> None:
    """Aurora's rules on a structurally valid job (each failure is added to `walk`)."""
    for part in ("role", "environment", "name"):
        text = str(_value(getattr(job, part)()))
        if not GOOD_IDENTIFIER.match(text):
            walk.add(origin, f"{fld}.{part}", f"Invalid {part} '{text}' (letters, digits, _ - . only)")
    policy = str(_value(job.cron_collision_policy())).upper()
    if policy not in CRON_POLICIES:
        walk.add(origin, f"{fld}.cron_collision_policy", f"Invalid CronCollisionPolicy type: {policy}; "
                 f"one of {', '.join(CRON_POLICIES)}")
    task = job.task()
    task_origin = origin_of(job._schema_data["task"]) or origin
    _task_rules(task, walk, f"{fld}.task", task_origin)
    constraints = _value(job.constraints()) or {}
    for name, value in constraints.items():
        if value.startswith("limit:"):
            try:
                int(value[len("limit:"):])
            except ValueError:
                walk.add(origin, f"{fld}.constraints[{name}]", f"{value} is not a valid limit value, "
                         "must be integer")
    if job.has_container():
        inner = job.container().unwrap()
        if isinstance(inner, schema.Container) and inner.docker() is Empty:
            walk.add(origin, f"{fld}.container", "If a container is specified it must set one type.")
    if job.has_announce():
        for port in (_value(job.announce().portmap()) or {}).values():
            if str(port).isdigit() and "dedicated" not in constraints:
                walk.add(origin, f"{fld}.announce.portmap",
                         "Job must be dedicated in order to specify static ports!")
    _update_rules(job, walk, fld, origin)


def _task_rules(task: Any, walk: _Walk, fld: str, origin: Origin | None) -> None:
    if not task.has_resources():
        walk.add(origin, f"{fld}.resources", "Task must specify resources!")
    else:
        res = task.resources()
        cpu, ram, disk = _value(res.cpu()), _value(res.ram()), _value(res.disk())
        if cpu <= 0 or ram // schema.MB <= 0 or disk // schema.MB <= 0:
            walk.add(origin_of(task._schema_data["resources"]) or origin, f"{fld}.resources",
                     f"cpu, ram and disk must all be positive (ram and disk in bytes, at least 1 MB):"
                     f" cpu:{cpu} ram:{ram} disk:{disk}")
    if not task.has_processes() or not task.processes().get():
        walk.add(origin, f"{fld}.processes", "Processes required for task")
        return
    names = [str(_value(p.name())) for p in task.processes()]
    for i, name in enumerate(names):
        if not PROCESS_NAME.match(name):
            walk.add(origin, f"{fld}.processes[{i}].name", f"Invalid process name: {name}")
        if names.index(name) != i:
            walk.add(origin, f"{fld}.processes[{i}].name", f"duplicate process name {name}")
    if len(set(names)) != len(names):
        return
    after: dict[str, set[str]] = {n: set() for n in names}
    for c, constraint in enumerate(task.constraints()):
        order = [str(n) for n in (_value(constraint.order()) or ())]
        for n in order:
            if n not in after:
                walk.add(origin, f"{fld}.constraints[{c}].order", f"names no process {n!r} of the task")
        for before, later in itertools.pairwise(order):
            if later in after:
                after[later].add(before)
    done: set[str] = set()
    pending = list(names)
    while pending:
        ready = [n for n in pending if after[n] & set(names) <= done]
        if not ready:
            walk.add(origin, f"{fld}.constraints", f"Task has invalid plan: order constraints form "
                     f"a cycle among {', '.join(sorted(pending))}")
            break
        done.update(ready)
        pending = [n for n in pending if n not in ready]


def _update_rules(job: Any, walk: _Walk, fld: str, origin: Origin | None) -> None:
    update = job.update_config()
    where = origin_of(job._schema_data["update_config"]) or origin
    at = f"{fld}.update_config"
    batch, watch = _value(update.batch_size()), _value(update.watch_secs())
    instances, max_total = _value(job.instances()), _value(update.max_total_failures())
    strategy = update.update_strategy()
    if batch <= 0:
        walk.add(where, f"{at}.batch_size", "Batch size should be greater than 0")
    if watch < 0:
        walk.add(where, f"{at}.watch_secs", "Watch seconds should be greater than or equal to 0")
    pulse = _value(update.pulse_interval_secs())
    if pulse is not None and pulse < MIN_PULSE_INTERVAL_SECS:
        walk.add(where, f"{at}.pulse_interval_secs",
                 f"Pulse interval seconds must be at least {MIN_PULSE_INTERVAL_SECS} seconds.")
    if strategy is not Empty and _value(update.wait_for_batch_completion()):
        walk.add(where, at, "Ambiguous update configuration. Cannot combine wait_batch_completion "
                 "with an explicit update strategy.")
    if strategy is not Empty and batch > 1:
        walk.add(where, at, "Ambiguous update configuration. Cannot combine update strategy with "
                 "batch size. Please set batch size inside of update strategy instead.")
    if max_total >= instances:
        walk.add(where, f"{at}.max_total_failures", f"max_total_failures in update_config must be "
                 f"lesser than the job size ({instances}): use max_total_failures <= {instances - 1}")
    health = job.health_check_config()
    for name in ("max_consecutive_failures", "min_consecutive_successes", "initial_interval_secs",
                 "interval_secs"):
        if _value(getattr(health, name)()) < 0:
            walk.add(origin, f"{fld}.health_check_config.{name}", "Value cannot be less than 0.")


def check(job: Any, path: str, fld: str = "job") -> None:
    """Raise ConfigError listing every problem of `job` (standard bindings already applied)."""
    origin = origin_of(job)
    walk = _Walk(origin, path)
    bound = runtime_stand_ins(job)
    walk.visit(bound, fld, origin)
    if not walk.problems:
        _job_rules(bound, walk, fld, origin)
    if walk.problems:
        raise ConfigError(walk.problems)
