"""`peloton host`: query hosts by state and move them through maintenance (v0 HostService).

A host goes UP → DRAINING (its tasks are moved off) → DRAINED → DOWN
after `maintenance start`, and DOWN → UP after `maintenance complete`.
"""

from __future__ import annotations

import click

from cli import context, params, views
from cli.output import to_dict
from peloton.api.client import PelotonClient
from peloton.api.gen.peloton.api.v0.host import host_pb2
from peloton.api.gen.pelotonpy.ext import capacity_pb2
from peloton.core import words
from peloton.core.errors import Unimplemented

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
    """List hosts with what each holds: allocated/total cpu, memory, disk, gpu, and tasks.

    With -j, the v0 response's `host_infos` plus our `capacity` (per host and cluster totals).

    \b
    Example:
      peloton host query --states=HOST_STATE_DOWN,HOST_STATE_DRAINING
    """
    out = context.out()
    client = context.client()
    response = client.query_hosts(params.enum_names(states, HOST_STATES, "HOST_STATE_"))
    capacity = host_capacity(client)
    if out.json_mode:
        data = to_dict(response)
        if capacity is not None:
            data["capacity"] = to_dict(capacity)
        out.json(data)
        return
    caps = {h.hostname: h for h in capacity.hosts} if capacity is not None else {}
    out.table(views.HOST, [views.host_row(h, caps.get(h.hostname)) for h in response.host_infos],
              empty="No hosts found")
    if capacity is not None and response.host_infos:
        out.wrapped(cluster_line(capacity))


def host_capacity(client: PelotonClient) -> capacity_pb2.ListHostCapacityResponse | None:
    """Our capacity extension's view, or None from a cluster that does not serve it."""
    try:
        return client.list_host_capacity()
    except Unimplemented:
        return None


def cluster_line(capacity: capacity_pb2.ListHostCapacityResponse) -> str:
    """'Cluster (2 UP hosts): 0.5 of 4 cpu, 160 MiB of 8 GiB memory allocated'."""
    t, a = capacity.cluster_total, capacity.cluster_allocated
    up = sum(1 for h in capacity.hosts if h.state == "UP" and h.connected)
    parts = [f"{words.number(a.cpu)} of {words.number(t.cpu)} cpu",
             f"{words.size_mb(a.mem_mb)} of {words.size_mb(t.mem_mb)} memory",
             f"{words.size_mb(a.disk_mb)} of {words.size_mb(t.disk_mb)} disk"]
    if t.gpu:
        parts.append(f"{words.number(a.gpu)} of {words.number(t.gpu)} gpu")
    return f"Cluster ({words.plural(up, 'UP host')}): {', '.join(parts)} allocated"


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
