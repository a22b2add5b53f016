"""`peloton watch job|pod|cancel`: follow job and pod changes as they happen (WatchService).

Streams run until the server ends them or the user presses Ctrl-C (no
RPC deadline applies); each change is printed as one line per job or pod
(state, pods by state, workflow progress, why a pod waits), as a YAML
document with `-o yaml`, or as one line of JSON with -j (or `-o json`), so
`peloton -j watch pod <job> | jq` works.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import click

from cli import context, ids, params, summaries
from cli.output import Output


def _labels(given: tuple[str, ...]) -> list[tuple[str, str]]:
    # The original's watch filters are key:value (not key=value), one per --labels.
    return [label for item in given for label in params.parse_labels(item, sep=":")]


def _follow(stream: Iterable[Any], output_format: str | None = None) -> None:
    out = context.out()
    if output_format == "json":
        out = Output(json_mode=True)
    for response in stream:
        if out.json_mode or output_format:
            out.event(response)
        else:
            summaries.watch_event(out, response)
    click.echo("watch stream has ended", err=True)


@click.group("watch")
def watch() -> None:
    """Watch job and pod runtime changes.

    \b
    Example:
      peloton watch job 358fad26-73fa-43c8-a350-1e9067571a76
      peloton -j watch pod 358fad26-73fa-43c8-a350-1e9067571a76
    """


@watch.command("job")
@click.argument("job_ids", metavar="[JOB]...", nargs=-1, type=ids.JOB_ID)
@click.option("--labels", multiple=True, help="Only jobs with this label (key:value); repeatable.")
@params.output_option
def job(job_ids: tuple[str, ...], labels: tuple[str, ...], output_format: str | None) -> None:
    """Stream changes of the given jobs (all jobs when none is given).

    \b
    Example:
      peloton watch job 358fad26-73fa-43c8-a350-1e9067571a76 --labels team:infra
    """
    _follow(context.client().watch_jobs(list(job_ids), _labels(labels)), output_format)


@watch.command("pod")
@ids.job_argument("[JOB]", default="")
@click.argument("pod_names", metavar="[POD]...", nargs=-1, type=ids.POD_NAME)
@click.option("--labels", multiple=True, help="Only pods with this label (key:value); repeatable.")
@params.output_option
def pod(job_id: str, pod_names: tuple[str, ...], labels: tuple[str, ...],
        output_format: str | None) -> None:
    """Stream changes of the pods of JOB (only the named PODs if given).

    \b
    Example:
      peloton watch pod 358fad26-73fa-43c8-a350-1e9067571a76 358fad26-73fa-43c8-a350-1e9067571a76-0
    """
    _follow(context.client().watch_pods(job_id, list(pod_names), _labels(labels)),
            output_format)


@watch.command("cancel")
@click.argument("watch_id", metavar="ID")
def cancel(watch_id: str) -> None:
    """Cancel a watch stream by its ID.

    \b
    Example:
      peloton watch cancel 1c5b0e3e-9d3f-4c1a-8f7e-2f6f0c8f1a2b
    """
    context.out().document(context.client().cancel_watch(watch_id))
