"""Entry point of the `peloton` command: the click root and its command groups."""

from __future__ import annotations

import click

from cli.agent import agent
from cli.archive import archive
from cli.archiver import archiver
from cli.aurora.group import aurora
from cli.aurorabridge import aurorabridge
from cli.auth import auth, login, logout
from cli.commands import API_GROUPS
from cli.context import PelotonGroup, global_options
from cli.daemons import hostmgr, jobmgr, placement, resmgr
from cli.migrate import migrate
from cli.simulate import simulate
from cli.ui import ui
from cli.up import up


@click.group(cls=PelotonGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="peloton-py")
@global_options
def cli() -> None:
    """Peloton for Python: run and use a cluster scheduler.

    \b
    Example:
      peloton up          # start a one-machine cluster
      peloton --help      # list every command
    """


cli.add_command(up)
cli.add_command(agent)
cli.add_command(migrate)
cli.add_command(aurorabridge)
cli.add_command(aurora)
cli.add_command(jobmgr)
cli.add_command(resmgr)
cli.add_command(hostmgr)
cli.add_command(placement)
cli.add_command(archiver)
cli.add_command(archive)
cli.add_command(ui)
cli.add_command(simulate)
cli.add_command(auth)
cli.add_command(login)
cli.add_command(logout)
for _group in API_GROUPS:
    cli.add_command(_group)


def main() -> None:
    """Run the CLI."""
    cli()
