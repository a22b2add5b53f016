"""The `aurora` root group: Aurora's nouns (job, update, cron, quota, sla, task)."""

from __future__ import annotations

import click

from cli.aurora import job_kill, job_status  # noqa: F401 - they add the kill/status verbs to `job`
from cli.aurora.cron import cron
from cli.aurora.jobs import job
from cli.aurora.quota import quota
from cli.aurora.sla import sla
from cli.aurora.task import task
from cli.aurora.updates import update


@click.group("aurora", context_settings={"help_option_names": ["-h", "--help"]})
def aurora() -> None:
    """Apache Aurora's client for this scheduler: `.aurora` configs, Aurora's verbs and exit codes.

    Clusters come from clusters.json ($AURORA_CONFIG_ROOT, default /etc/aurora, then
    ~/.aurora); job keys are CLUSTER/ROLE/ENV/NAME.  `aurora ...` and `peloton aurora ...`
    are the same commands.

    \b
    Example:
      peloton aurora job create devcluster/www/devel/hello hello.aurora
    """


for _noun in (job, update, cron, quota, sla, task):
    aurora.add_command(_noun)
