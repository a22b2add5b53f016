"""Entry point of the `peloton` command: the click root and its command groups."""

from __future__ import annotations

import click

from cli.up import up


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="peloton-py")
def cli() -> None:
    """Peloton for Python: run and use a cluster scheduler.

    \b
    Example:
      peloton up          # start a one-machine cluster
      peloton --help      # list every command
    """


cli.add_command(up)


def main() -> None:
    """Run the CLI."""
    cli()
