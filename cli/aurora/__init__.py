"""The `aurora` command: Apache Aurora's client (nouns and verbs, arguments, exit codes) on our
scheduler's Aurora endpoint.  Also `peloton aurora ...`.

group.py (the root and its error handling), context.py (clusters, calls, configs),
options.py (argument types), monitor.py (waiting on tasks), one module per noun:
jobs.py/job_kill.py/job_status.py (`job`), updates.py, cron.py, quota.py, sla.py, task.py.
The config side (.aurora files, the Thrift conversion) is aurorabridge/client/.
"""
