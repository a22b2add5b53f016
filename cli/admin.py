"""`peloton admin lock|unlock`: lock down job manager components (v1alpha AdminService).

Locking `Write` makes the job manager refuse writes, `Kill` stops it
killing tasks, `GoalStateEngine` pauses its goal-state engine; `unlock`
lifts the lock.  Useful around maintenance of the cluster itself.
"""

from __future__ import annotations

import click

from cli import context
from peloton.api.gen.peloton.api.v1alpha.admin.svc import admin_svc_pb2

COMPONENTS = list(admin_svc_pb2.Component.keys())


@click.group("admin")
def admin() -> None:
    """Administrative APIs.

    \b
    Example:
      peloton admin lock Write Kill
      peloton admin unlock Write Kill
    """


@admin.command("lock")
@click.argument("components", nargs=-1, required=True, type=click.Choice(COMPONENTS))
def lock(components: tuple[str, ...]) -> None:
    """Lock down job manager components.

    \b
    Example:
      peloton admin lock GoalStateEngine Write
    """
    context.out().document(context.client().lockdown(components))


@admin.command("unlock")
@click.argument("components", nargs=-1, required=True, type=click.Choice(COMPONENTS))
def unlock(components: tuple[str, ...]) -> None:
    """Lift a lockdown of job manager components.

    \b
    Example:
      peloton admin unlock GoalStateEngine Write
    """
    context.out().document(context.client().remove_lockdown(components))
