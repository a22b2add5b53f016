"""The API command groups of `peloton`, assembled in one place for cli/main.py.

Each noun module defines its commands; the few that extend another
module's group (job control, stateless workflows) are attached here, so
no module needs to import its parent for side effects.
"""

from __future__ import annotations

import click

from cli import job_control, job_forecast, stateless_workflow
from cli.admin import admin
from cli.cron import cron
from cli.host import host
from cli.job import job
from cli.pod import pod
from cli.respool import respool
from cli.stateless import stateless
from cli.task import task
from cli.update import update
from cli.watch import watch

job_control.register(job)
job_forecast.register(job)
stateless_workflow.register(stateless)
job.add_command(stateless)

#: Groups added to the root `peloton` command.
API_GROUPS: tuple[click.Group, ...] = (respool, job, task, pod, host, update, watch, admin, cron)
