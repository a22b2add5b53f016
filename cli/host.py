"""`peloton host`: query hosts by state and move them through maintenance (v0 HostService).

A host goes UP → DRAINING (its tasks are moved off) → DRAINED → DOWN
after `maintenance start`, and DOWN → UP after `maintenance complete`.
"""

from __future__ import annotations

import click

from cli import context, params, views
from peloton.api.gen.peloton.api.v0.host import host_pb2

HOST_STATES = list(host_pb2.HostState.keys())


@click.group("host")
def host() -> None:
    """Query hosts and manage host maintenance.

    \b
    Example:
      peloton host query --states=HOST_STATE_DOWN,HOST_STATE_DRAINING
      peloton host maintenance start host1
    """


@host.command("query")
@click.option("-s", "--states", default="",
              help="Comma-separated host states: HOST_STATE_UP, _DRAINING, _DRAINED, _DOWN "
                   "(prefix optional).")
def query(states: str) -> None:
    """List hosts, optionally only those in the given states.

    \b
    Example:
      peloton host query --states=HOST_STATE_DOWN,HOST_STATE_DRAINING
    """
    out = context.out()
    response = context.client().query_hosts(params.enum_names(states, HOST_STATES, "HOST_STATE_"))
    if out.json_mode:
        out.json(response)
        return
    out.table(views.HOST, [views.host_row(h) for h in response.host_infos], empty="No hosts found")


@host.group("maintenance")
def maintenance() -> None:
    """Start or complete host maintenance.

    \b
    Example:
      peloton host maintenance start host1
      peloton host maintenance complete host1
    """


def _hostnames(given: tuple[str, ...]) -> list[str]:
    names = [name for item in given for name in params.csv(item)]
    if not names:
        raise click.UsageError("no hostname given")
    if len(set(names)) != len(names):
        raise click.UsageError("a hostname is given more than once")
    return names


@maintenance.command("start")
@click.argument("hostnames", metavar="HOSTNAME...", nargs=-1, required=True)
def start(hostnames: tuple[str, ...]) -> None:
    """Drain hosts and take them down for maintenance (comma or space separated).

    \b
    Example:
      peloton host maintenance start host1
      peloton host maintenance start host1,host2
    """
    client, out = context.client(), context.out()
    for name in _hostnames(hostnames):
        response = client.start_maintenance(name)
        out.result(response, f"Host successfully submitted for maintenance: {response.hostname or name}")


@maintenance.command("complete")
@click.argument("hostnames", metavar="HOSTNAME...", nargs=-1, required=True)
def complete(hostnames: tuple[str, ...]) -> None:
    """Bring hosts in maintenance back up.

    \b
    Example:
      peloton host maintenance complete host1
    """
    client, out = context.client(), context.out()
    for name in _hostnames(hostnames):
        response = client.complete_maintenance(name)
        out.result(response, "Host successfully submitted for maintenance completion: "
                             f"{response.hostname or name}")
