"""`peloton up`: run a one-machine cluster in the foreground."""

from __future__ import annotations

import click


@click.command("up")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to serve on.")
@click.option("--grpc-port", default=5392, show_default=True, type=int,
              help="gRPC port of the Peloton API (0 picks a free port).")
def up(host: str, grpc_port: int) -> None:
    """Start every daemon of a one-machine cluster and serve until Ctrl-C.

    \b
    Example:
      peloton up --grpc-port 5392
    """
    from peloton.cluster.allinone import UpConfig, run

    run(UpConfig(host=host, grpc_port=grpc_port))
