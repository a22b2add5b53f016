"""Update options beyond Peloton's (our extension, proto/pelotonpy/api/update): flags and views.

`--watch-time`, `--strategy`, `--group-sizes` and `--autopause` on the commands that
start an update (`job stateless create|replace`, `update create`); without any of
them the update rolls as on Peloton.  `job stateless workflow options` shows what a
workflow runs with and where it stands (auto-paused, instances in their watch time).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from cli import context, ids
from peloton.api.gen.pelotonpy.api.update import update_pb2 as pb
from peloton.core.errors import InvalidArgument

F = TypeVar("F", bound=Callable[..., Any])
STRATEGIES = {"queue": pb.STRATEGY_QUEUE, "batch": pb.STRATEGY_BATCH,
              "var-batch": pb.STRATEGY_VAR_BATCH}
_NAMES = {v: k for k, v in STRATEGIES.items()}


def flags(f: F) -> F:
    """--watch-time, --strategy, --group-sizes, --autopause (all optional)."""
    f = click.option("--autopause", is_flag=True,
                     help="batch/var-batch: pause after each batch until resumed (not after the "
                          "last).")(f)
    f = click.option("--group-sizes", default="",
                     help="var-batch group sizes, e.g. 1,5,10 (the last repeats); implies "
                          "--strategy var-batch.")(f)
    f = click.option("--strategy", type=click.Choice(sorted(STRATEGIES)), default=None,
                     help="queue: keep BATCH_SIZE updating (default, Peloton's); batch: groups "
                          "of BATCH_SIZE, each finished before the next; var-batch: groups of "
                          "--group-sizes in turn.")(f)
    return click.option("--watch-time", type=click.FloatRange(min=0), default=None,
                        metavar="SECONDS",
                        help="An instance counts as updated only after its new run stayed "
                             "RUNNING (and healthy) this long; dying sooner is a failure.")(f)


def options(watch_time: float | None, strategy: str | None, group_sizes: str,
            autopause: bool) -> pb.UpdateOptions | None:
    """The UpdateOptions the flags ask for (None: none given, roll as on Peloton)."""
    if watch_time is None and strategy is None and not group_sizes and not autopause:
        return None
    sizes: list[int] = []
    for part in (p.strip() for p in group_sizes.split(",") if p.strip()):
        try:
            sizes.append(int(part))
        except ValueError:
            raise InvalidArgument(f"--group-sizes: {part!r} is not a number",
                                  field="group-sizes") from None
    name = strategy or ("var-batch" if sizes else "queue")
    return pb.UpdateOptions(strategy=STRATEGIES[name], group_sizes=sizes,
                            autopause_after_batch=autopause,
                            watch_time_ms=round((watch_time or 0.0) * 1000))


def describe(resp: pb.GetWorkflowOptionsResponse) -> list[tuple[str, str]]:
    """Lines of `workflow options`: (label, value)."""
    o = resp.options
    strategy = _NAMES.get(o.strategy, str(o.strategy))
    if o.group_sizes:
        strategy += " " + ",".join(str(s) for s in o.group_sizes)
    watching = ", ".join(f"{w.instance_id} ({w.remaining_ms / 1000:.1f}s left)"
                         for w in resp.watching) or "none"
    return [("Workflow", resp.update_id), ("Strategy", strategy),
            ("Auto-pause", "yes" if o.autopause_after_batch else "no"),
            ("Watch time", f"{o.watch_time_ms / 1000:g}s"),
            ("Paused after a batch", "yes" if resp.auto_paused else "no"),
            ("In their watch time", watching)]


@click.command("options")
@ids.job_argument()
@click.option("--update-id", default="", help="A workflow of the job (default: its latest).")
def show(job_id: str, update_id: str) -> None:
    """Show the update options a workflow runs with: strategy, auto-pause, watch time, and
    which instances are still in their watch time.

    \b
    Example:
      peloton job stateless workflow options 358fad26-73fa-43c8-a350-1e9067571a76
    """
    out = context.out()
    resp = context.client().get_workflow_options(job_id, update_id)
    if out.json_mode:
        out.json(resp)
        return
    for label, value in describe(resp):
        out.line(f"{label + ':':<22} {value}")
