"""`peloton respool`: create, update, delete, dump and look up resource pools.

Pools are named by path (`/DefaultResPool`, `/a/b`); the config file's
`name` must match the last path element, and the parent comes from the
path, never from the file, exactly as the original CLI checks.
"""

from __future__ import annotations

import click

from cli import context, params, specs, summaries
from cli.output import to_dict
from peloton.api.gen.peloton.api.v0.respool import respool_pb2
from peloton.core.errors import InvalidArgument, Unimplemented

ROOT = "/"


def split_path(path: str) -> tuple[str, str]:
    """`/a/b` → (`/a`, `b`); `/a` → (`/`, `a`)."""
    trimmed = path.rstrip("/")
    parent, _, name = trimmed.rpartition("/")
    return (parent or ROOT), name


def _checked_config(path: str, config_file: str, verb: str) -> tuple[str, respool_pb2.ResourcePoolConfig]:
    if path.rstrip("/") == "":
        raise InvalidArgument(f"cannot {verb} the root resource pool", field="respool")
    config = specs.load_respool_config(config_file)
    if config.HasField("parent"):
        raise InvalidArgument("parent should not be supplied in the config; it comes from the path",
                              field="parent")
    parent, name = split_path(path)
    if name != config.name:
        raise InvalidArgument(f"resource pool name in path ({name}) and config ({config.name}) "
                              "don't match", field="name")
    return parent, config


@click.group("respool")
def respool() -> None:
    """Manage resource pools.

    \b
    Example:
      peloton respool create /DefaultResPool docs/examples/respool.yaml
      peloton respool dump
    """


@respool.command("create")
@params.lenient_option
@click.argument("respool_path", metavar="RESPOOL")
@click.argument("config", type=click.Path(exists=True, dir_okay=False))
def create(respool_path: str, config: str) -> None:
    """Create the pool RESPOOL (its full path) from a YAML CONFIG.

    \b
    Example:
      peloton respool create /DefaultResPool docs/examples/respool.yaml
    """
    client, out = context.client(), context.out()
    parent, cfg = _checked_config(respool_path, config, "create")
    cfg.parent.value = client.lookup_respool_id(parent).id.value
    response = client.create_respool(cfg)
    out.result(response, f"Resource Pool {response.result.value} created at {respool_path}")


@respool.command("update")
@params.lenient_option
@click.argument("respool_path", metavar="RESPOOL")
@click.argument("config", type=click.Path(exists=True, dir_okay=False))
@click.option("-f", "--force", is_flag=True, help="Force the update even if validation fails.")
def update(respool_path: str, config: str, force: bool) -> None:
    """Replace the config of the existing pool RESPOOL.

    \b
    Example:
      peloton respool update /DefaultResPool docs/examples/respool.yaml
    """
    if force and not click.confirm("Are you sure you want to force a Resource Pool Update?"):
        return
    client, out = context.client(), context.out()
    parent, cfg = _checked_config(respool_path, config, "update")
    cfg.parent.value = client.lookup_respool_id(parent).id.value
    pool_id = client.lookup_respool_id(respool_path).id.value
    response = client.update_respool(pool_id, cfg, force=force)
    out.result(response, f"Resource Pool {respool_path} updated")


@respool.command("delete")
@click.argument("respool_path", metavar="RESPOOL")
def delete(respool_path: str) -> None:
    """Delete the (idle, leaf) pool RESPOOL.

    \b
    Example:
      peloton respool delete /DefaultResPool/child
    """
    if respool_path.rstrip("/") == "":
        raise InvalidArgument("cannot delete the root resource pool", field="respool")
    response = context.client().delete_respool(respool_path)
    context.out().result(response, f"Resource Pool {respool_path} is deleted")


@respool.command("dump")
@click.option("-o", "--output", "--format", "fmt", type=click.Choice(["yaml", "yml", "json"]),
              default=None, help="Print every pool's full config and usage as YAML or JSON "
                                 "instead of the table.")
def dump(fmt: str | None) -> None:
    """Show every resource pool: reserved, limit, entitled now, allocated, queued demand and
    tasks (cpu/memory), with the cluster's capacity; pools whose limit the cluster cannot
    give are flagged.

    \b
    Example:
      peloton respool dump
      peloton respool dump --format json
    """
    out = context.out()
    client = context.client()
    if out.json_mode or fmt:
        response = client.query_respools()
        if out.json_mode:
            out.json(response)
        else:
            out.dump([to_dict(pool) for pool in response.resourcePools], fmt or "yaml")
        return
    try:
        status = client.list_pool_status()
    except Unimplemented:  # a cluster without our extension: the raw pools
        out.dump([to_dict(pool) for pool in client.query_respools().resourcePools], "yaml")
        return
    summaries.pools(out, status)


@respool.command("lookup")
@click.argument("respool_path", metavar="RESPOOL")
def lookup(respool_path: str) -> None:
    """Print the ID of the pool at path RESPOOL.

    \b
    Example:
      peloton respool lookup /DefaultResPool
    """
    response = context.client().lookup_respool_id(respool_path)
    context.out().result(response, response.id.value)
