"""Aurora's client side, ours: `.aurora` configs and the calls of the `aurora` command.

* schema.py, helpers.py: the Pystachio objects and functions a `.aurora` file uses;
* loader.py, origins.py, validate.py, errors.py, config.py: run a file, pick a
  job, check it (errors name file:line and the field);
* convert.py, update_settings.py: the job as Aurora's Thrift JobConfiguration and
  JobUpdateSettings;
* clusters.py, scheduler.py: clusters.json and the Thrift calls over HTTP.

The `aurora` command itself is cli/aurora/.
"""
