"""`aurora quota get CLUSTER/ROLE`: a role's quota and what its jobs consume."""

from __future__ import annotations

import json
from typing import Any

import click

from cli.aurora import options as o
from cli.aurora.context import AuroraContext, out
from cli.aurora.diff import plain
from cli.aurora.exit_codes import EXIT_OK
from cli.aurora.job_status import RESOURCES
from cli.aurora.runner import verb

SECTIONS = (("prodSharedConsumption", "Production shared pool resources consumed:"),
            ("prodDedicatedConsumption", "Production dedicated pool resources consumed:"),
            ("nonProdSharedConsumption", "Non-production shared pool resources consumed:"),
            ("nonProdDedicatedConsumption", "Non-production dedicated pool resources consumed:"))


def aggregate_lines(aggregate: Any) -> list[str]:
    """`  CPU: 4.0 core(s)`, ... of a ResourceAggregate."""
    lines = []
    for fld, name, unit in RESOURCES:
        for resource in (aggregate.resources if aggregate is not None else None) or []:
            value = getattr(resource, fld)
            if value is not None:
                lines.append(f"  {name}: {value}{unit}")
    return lines


@click.group("quota")
def quota() -> None:
    """Work with quota settings for an Apache Aurora cluster.

    \b
    Example:
      peloton aurora quota get devcluster/www
    """


@quota.command("get")
@o.write_json_option
@click.argument("role", type=o.ROLE)
@verb
def get(ctx: AuroraContext, role: tuple[str, str], write_json: bool) -> int:
    """Print information about quotas for a role.

    \b
    Example:
      peloton aurora quota get devcluster/www
    """
    cluster, name = role
    resp = ctx.check(ctx.call(cluster, "getQuota", name), err_msg=f"Error retrieving quota for role {name}")
    result = resp.result.getQuotaResult
    if write_json:
        out(json.dumps(plain(result), sort_keys=True))
        return EXIT_OK
    lines = ["Allocated:", *aggregate_lines(result.quota)]
    for fld, title in SECTIONS:
        value = getattr(result, fld)
        if value is not None:
            lines += [title, *aggregate_lines(value)]
    out("\n".join(lines))
    return EXIT_OK
