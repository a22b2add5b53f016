"""Cron jobs: Aurora's crontab syntax, next and previous due times, and the trigger rules.

Pure: `schedule` parses and computes times (UTC), `model` holds the stored
cron job, `trigger` decides which due time to run and what a collision does.
The job manager's cron component (peloton/jobmgr/cron.py) applies them.
"""
