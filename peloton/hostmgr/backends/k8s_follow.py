"""Following one kind of Kubernetes object: list it, then watch it (Kubernetes' reflector).

The Kubernetes backend (k8s.py) follows nodes and pods this way, each in a thread of its
own.  A list gives the objects and a resourceVersion; the watch from that version gives
every change after it.  A watch that ends (its timeout) is opened again from the last
version seen; one that fails (410 Gone: the version is too old, the API server restarted;
any other error, after a capped backoff) lists again, and the backend's view compares the
list with what it knew, so an object that changed or vanished meanwhile is seen.  The view
is changed under the backend's lock; what it has to say (an Outbox) is sent after.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from peloton.hostmgr.backends.k8s_api import Gone, KubeApi, KubeError, KubeWatch
from peloton.hostmgr.backends.k8s_config import KubeConfig
from peloton.hostmgr.backends.k8s_view import Outbox
from peloton.hostmgr.backends.k8s_wire import Json

log = logging.getLogger(__name__)

#: The first pause after a failed list or watch (doubled up to the config's cap).
FIRST_BACKOFF = 0.2


class Follower:
    """Lists and watches for one backend; `close_all` ends every open watch (the backend
    stopping), after which each `follow` returns once `stopping` is set."""

    def __init__(self, api: KubeApi, lock: threading.RLock, stopping: threading.Event,
                 flush: Callable[[Outbox], None], config: KubeConfig) -> None:
        self._api = api
        self._lock = lock
        self._stopping = stopping
        self._flush = flush
        self.config = config
        #: The watches open now.
        self._watches: set[KubeWatch] = set()

    def close_all(self) -> None:
        """Close every open watch (their `follow` loops go on unless `stopping` is set)."""
        with self._lock:
            watches = list(self._watches)
        for watch in watches:
            watch.close()

    def follow(self, path: str, query: list[tuple[str, str]], mark: Callable[[], int],
               listed: Callable[[Outbox, list[Json], int], None],
               event: Callable[[Outbox, str, Json], None],
               after_list: Callable[[], None]) -> None:
        """List `path`, then watch it from the list's resourceVersion, until `stopping`:
        `listed(out, items, mark)` gets each list with the view's mark taken before it was
        asked for (k8s_view.py `list_mark`), `event(out, type, object)` each change, and
        `after_list()` runs after every list."""
        backoff = FIRST_BACKOFF
        version = ""
        while not self._stopping.is_set():
            try:
                if not version:
                    with self._lock:
                        before = mark()
                    items, version = self._api.list(path, query)
                    out = Outbox()
                    with self._lock:
                        listed(out, items, before)
                    self._flush(out)
                    after_list()
                watch = self._api.watch(path, version, query, self.config.watch_timeout_secs)
                with self._lock:
                    self._watches.add(watch)
                try:
                    for ev in watch.events():
                        obj = ev.get("object") or {}
                        version = obj.get("metadata", {}).get("resourceVersion") or version
                        if ev.get("type") == "BOOKMARK":
                            continue
                        out = Outbox()
                        with self._lock:
                            event(out, str(ev.get("type")), obj)
                        self._flush(out)
                finally:
                    with self._lock:
                        self._watches.discard(watch)
                backoff = FIRST_BACKOFF
            except Gone:
                version = ""  # too old: list again
            except KubeError as exc:
                if self._stopping.is_set():
                    return
                log.warning("watching %s: %s (again in %.1f s)", path, exc, backoff)
                version = ""
                self._stopping.wait(backoff)
                backoff = min(backoff * 2, self.config.max_backoff_secs)
            except Exception:
                log.exception("watching %s failed", path)
                version = ""
                self._stopping.wait(backoff)
                backoff = min(backoff * 2, self.config.max_backoff_secs)
