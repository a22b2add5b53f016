"""`peloton archiver`: move finished batch jobs into a cold archive, then out of hot storage."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import click

from cli import context, params
from cli.archive import archive_option


def _flag(name: str, value: Any) -> dict[str, Any]:
    return {} if value is None else {name: value}


@click.command("archiver")
@archive_option
@click.option("--jobmgr", default="", help="host:port of the job manager [default: the global -m].")
@click.option("-c", "--config", "config_files", multiple=True, type=click.Path(exists=True, dir_okay=False),
              help="YAML with an `archiver:` section (Peloton's knob names, seconds); repeatable.")
@click.option("--interval", type=params.DURATION, default=None,
              help="Time between passes (archive_interval) [default: 10m].")
@click.option("--age", type=params.DURATION, default=None,
              help="Archive jobs finished at least this long ago (archive_age) [default: 24h].")
@click.option("--step", type=params.DURATION, default=None,
              help="Width of the window that slides back each pass (archive_step_size) [default: 1h].")
@click.option("--max-entries", type=int, default=None,
              help="Jobs per window and pass (max_archive_entries) [default: 5000].")
@click.option("--bootstrap-delay", type=params.DURATION, default=None,
              help="Wait before the first pass (bootstrap_delay) [default: 10s].")
@click.option("--stream-only", is_flag=True, default=None,
              help="Archive but never delete from hot storage (stream_only_mode).")
@click.option("--pod-events-cleanup/--no-pod-events-cleanup", default=None,
              help="Trim pod events of running services to the last 100 runs [default: on].")
@click.option("--once", is_flag=True, help="Run one pass now, print what it did, and exit.")
def archiver(archive_url: str, jobmgr: str, config_files: tuple[str, ...], interval: float | None,
             age: float | None, step: float | None, max_entries: int | None,
             bootstrap_delay: float | None, stream_only: bool | None,
             pod_events_cleanup: bool | None, once: bool) -> None:
    """Archive terminal batch jobs, then delete them from hot storage.

    Each pass writes every finished batch job in its window (config, runtime,
    tasks, pod events) to the archive, makes it durable, reads it back, and
    only then deletes the job.  Read archived jobs with `peloton archive`.

    \b
    Example:
      peloton archiver --archive dir:///var/lib/peloton/archive --age 24h --interval 10m
      peloton -m 127.0.0.1:5392 archiver --archive sqlite:///archive.db --age 0 --once
    """
    from peloton.common import geventsetup

    geventsetup.setup()  # before the client opens channels
    from archiver.app import run
    from archiver.config import ArchiverFile
    from peloton.api.client import PelotonClient
    from peloton.common.config import load_config
    from peloton.common.tls import TlsFiles

    base = load_config(ArchiverFile, list(config_files)).archiver  # env: PELOTON_ARCHIVER_<KNOB>
    config = replace(base, **_flag("archive_interval", interval), **_flag("archive_age", age),
                     **_flag("archive_step_size", step), **_flag("max_archive_entries", max_entries),
                     **_flag("bootstrap_delay", 0.0 if once else bootstrap_delay),
                     **_flag("stream_only_mode", stream_only),
                     **_flag("pod_events_cleanup", pod_events_cleanup))
    settings = context.settings()
    # Credentials and TLS as every command's: --basicAuthConfig (a user whose role may delete
    # jobs) or a `peloton login` token, --tls-*.
    client = PelotonClient(
        jobmgr or settings.jobmgr, settings.resmgr, settings.hostmgr,
        zk_servers=() if jobmgr else settings.zk_servers, zk_root=settings.zk_root,
        caller="peloton-archiver", timeout=config.peloton_client_timeout,
        headers=context.basic_auth_headers(settings.basic_auth_config),
        tls=TlsFiles.from_options(settings.tls_cert, settings.tls_key, settings.tls_ca))
    click.get_current_context().call_on_close(client.close)
    report = run(archive_url, config, client, once=once,
                 announce=lambda text: click.echo(text, err=True))
    if report is None:
        return
    out = context.out()
    if out.json_mode:
        out.json({"found": report.found, "archived": report.archived,
                  "already_archived": report.already_archived, "deleted": report.deleted,
                  "delete_failures": report.delete_failures, "skipped": report.skipped,
                  "trimmed_instances": report.trimmed_instances, "errors": report.errors})
    else:
        out.line(f"{report.found} finished job(s) found: {report.archived} archived "
                 f"({report.already_archived} already), {report.deleted} deleted, "
                 f"{report.skipped} non-batch kept; {report.trimmed_instances} instance(s) "
                 "had pod events trimmed")
    if report.errors:  # logged as warnings already; a script must see that part of the pass failed
        click.get_current_context().exit(1)
