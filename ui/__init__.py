"""The web UI: pages for a cluster's jobs, tasks, workflows, pools and hosts, and their JSON API.

A front like the CLI: it reaches Peloton only through the typed client
(`peloton.api.client`).  `server` is the composition root, `http` the WSGI
routes and error mapping, `reads` and `actions` what the pages show and
do, `render` the message-to-JSON conversions; `static/` holds the pages
(HTML, CSS and JavaScript modules served as they are: no build step, no
third-party assets).
"""

#: The web UI's port in Peloton's port plan (shared/DESIGN.md).
DEFAULT_PORT = 5292
#: How often pages poll for fresh data, in milliseconds.
DEFAULT_REFRESH_MS = 2000
