"""The index of the JSON API (`GET /ui/api/`): every route, what it returns or does.

Built from the routes the app really serves (ui/http.py), with one line of
help per route from `HELP`; a test checks that every route has one, so the
index cannot drift from the routes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ui.render import Json

#: Readable route -> what it is for.
HELP: dict[str, str] = {
    "GET /ui/api/": "this index",
    "GET /ui/api/overview": "hosts, jobs and tasks by state; cluster capacity; top-level pools",
    "GET /ui/api/pools": "every pool: reservation, limit, allocation, entitlement, demand, queue",
    "GET /ui/api/hosts": "every host (?state=UP,DOWN) with total, allocated and free resources",
    "GET /ui/api/jobs": "jobs (?state=&name=&owner=&pool=&limit=), newest first",
    "GET /ui/api/jobs/<job>": "a job: config, status, tasks with why they wait, workflows, explain",
    "GET /ui/api/jobs/<job>/explain": "why a job's tasks wait: pool, queue, capacity, reasons",
    "GET /ui/api/jobs/<job>/forecast": "when its pending tasks (?instance=) start, what binds "
                                       "them, what would start them sooner (seconds to answer)",
    "GET /ui/api/jobs/<job>/tasks/<instance>": "one task: run, why it waits, events, logs "
                                               "(?log_bytes=)",
    "POST /ui/api/jobs/<job>/(stop|start|restart)": "act on every instance "
                                                   "(body {\"batch_size\": n} for services)",
    "POST /ui/api/jobs/<job>/tasks/<instance>/(stop|start|restart)": "act on one instance",
    "POST /ui/api/jobs/<job>/workflow/(pause|resume|abort)": "steer the job's current workflow",
    "POST /ui/api/hosts/<host>/maintenance/(start|complete)": "drain a host, or bring it back",
}

_GROUP = re.compile(r"\(\?P<(\w+)>([^)]*)\)")


def readable(method: str, pattern: str) -> str:
    """`GET /ui/api/jobs/<job>` from a route's method and regex."""
    def group(m: re.Match[str]) -> str:
        name, body = m.group(1), m.group(2)
        return f"({body})" if "|" in body else f"<{name}>"

    return f"{method} /ui/api{_GROUP.sub(group, pattern) or '/'}"


def index(routes: Iterable[tuple[str, str]]) -> Json:
    """The index document for (method, regex) routes."""
    out = []
    for method, pattern in routes:
        route = readable(method, pattern)
        verb, _, path = route.partition(" ")
        out.append({"method": verb, "path": path, "what": HELP.get(route, "")})
    return {"routes": out, "errors": 'every error is {"error": kind, "message": text} with '
                                     "the HTTP status of its kind",
            "writes": "POST with Content-Type: application/json and the session's CSRF token "
                      "in X-CSRF-Token, from this host's pages"}
