"""`aurora sla get-task-up-count|get-job-uptime`: how long a job's instances have been up.

An instance's uptime is the time since its task's first RUNNING event (tasks
in a live state).  get-task-up-count prints, per duration, the percentage of
instances up at least that long; get-job-uptime the uptime at each
percentile (the instance uptimes sorted, the one at that percentile).
"""

from __future__ import annotations

import math
import re
import time
from typing import Any

import click

from aurorabridge.thrift_api import api
from cli.aurora import options as o
from cli.aurora.context import AuroraContext, out
from cli.aurora.exit_codes import EXIT_OK
from cli.aurora.options import JobKey
from cli.aurora.runner import verb

_TIME = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")
DEFAULT_DURATIONS = "1m,10m,1h,12h,7d"
DEFAULT_PERCENTILES = "99,95,90,85,75,60,50,30,10"


def parse_durations(text: str) -> list[tuple[str, int]]:
    """`1m,1h3m` -> [('1m', 60), ('1h3m', 3780)] sorted by length (ValueError if malformed)."""
    found = []
    for part in text.split(","):
        match = _TIME.match(part.strip())
        if not part.strip() or match is None:
            raise ValueError(f"Invalid time value: {part} (format XdYhZmWs)")
        d, h, m, s = (int(g or 0) for g in match.groups())
        found.append((part.strip(), ((d * 24 + h) * 60 + m) * 60 + s))
    return sorted(found, key=lambda item: item[1])


def parse_percentiles(text: str) -> list[float]:
    """`50,99.9` -> [50.0, 99.9] (each strictly between 0 and 100)."""
    values = []
    for part in text.split(","):
        try:
            value = float(part)
        except ValueError:
            value = -1.0
        if not 0 < value < 100:
            raise ValueError(f"Invalid percentile value:{part}. Must be between 0.0 and 100.0 exclusive.")
        values.append(value)
    return sorted(values)


def uptimes(ctx: AuroraContext, key: JobKey, now: float | None = None) -> dict[int, int]:
    """Instance -> seconds since its live task first became RUNNING."""
    clock = time.time() if now is None else now
    result = {}
    for task in ctx.query(key, statuses=set(api.LIVE_STATES)):
        for event in sorted(task.taskEvents or [], key=lambda e: e.timestamp):
            if event.status == api.ScheduleStatus.RUNNING:
                result[task.assignedTask.instanceId] = math.floor(clock - event.timestamp / 1000)
                break
    return result


def up_count(values: dict[int, int], duration: int) -> float:
    """Percentage of instances up at least `duration` seconds."""
    return 100.0 * sum(1 for v in values.values() if v >= duration) / len(values) if values else 0.0


def job_uptime(values: dict[int, int], percentile: float) -> int:
    """The uptime at `percentile`."""
    total = len(values)
    index = total - math.floor(percentile / 100.0 * total) - 1
    return sorted(values.values())[index] if 0 <= index < total else 0


class _Durations(click.ParamType):  # type: ignore[type-arg]  # generic only in click >= 8.2
    name = "durations"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return parse_durations(value) if isinstance(value, str) else value
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


class _Percentiles(click.ParamType):  # type: ignore[type-arg]  # generic only in click >= 8.2
    name = "percentiles"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return parse_percentiles(value) if isinstance(value, str) else value
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


@click.group("sla")
def sla() -> None:
    """Work with SLA data in Aurora cluster.

    \b
    Example:
      peloton aurora sla get-job-uptime devcluster/www/devel/hello
    """


@sla.command("get-task-up-count")
@click.option("--durations", type=_Durations(), default=None, help="Durations to report uptime for, "
              "XdYhZmWs each (e.g. --durations=3m,10s,1h3m10s)")
@click.argument("jobspec", type=o.JOB_KEY)
@verb
def get_task_up_count(ctx: AuroraContext, jobspec: JobKey, durations: list[tuple[str, int]] | None) -> int:
    """Print the percentage of tasks that stayed up within the last "duration" s|m|h|d.

    \b
    Example:
      peloton aurora sla get-task-up-count devcluster/www/devel/hello --durations 1m,1h
    """
    values = uptimes(ctx, jobspec)
    lines = [f"{text}\t- {up_count(values, secs):.2f} %"
             for text, secs in durations or parse_durations(DEFAULT_DURATIONS)]
    out("\n".join(lines))
    return EXIT_OK


@sla.command("get-job-uptime")
@click.option("--percentiles", type=_Percentiles(), default=None,
              help="Percentiles to report uptime for, within (0.0, 100.0) (e.g. 50,75,95.5)")
@click.argument("jobspec", type=o.JOB_KEY)
@verb
def get_job_uptime(ctx: AuroraContext, jobspec: JobKey, percentiles: list[float] | None) -> int:
    """Print the job uptime at the given percentiles.

    \b
    Example:
      peloton aurora sla get-job-uptime devcluster/www/devel/hello --percentiles 50,99
    """
    values = uptimes(ctx, jobspec)
    chosen = percentiles or parse_percentiles(DEFAULT_PERCENTILES)
    out("\n".join(f"{p} percentile\t- {job_uptime(values, p)} seconds" for p in sorted(chosen, reverse=True)))
    return EXIT_OK
