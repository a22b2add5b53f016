"""A per-client limit on the UI's anonymous requests: one token bucket per client address.

With authentication on, a request without a signed-in session (the login page,
its static files, a login attempt, an API call answered 401) takes a token from
its client's bucket; an empty bucket answers 429 before a session is made or a
password is checked.  Signed-in users are never counted, and neither is anyone
when authentication is off (there is no one to protect then).

Buckets are bounded in number, least recently seen evicted: many addresses cost
bounded memory, and an evicted address starts again with a full bucket (at worst
one more burst).  Behind a reverse proxy every browser shares the proxy's address,
so a flood there slows the login page for everyone; it still cannot sign anyone
out (sessions.py keeps signed-in sessions apart from anonymous ones).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from peloton.common.clock import SYSTEM_CLOCK, Clock

#: Anonymous requests per second a client may sustain, and how many it may make at once.
RATE = 20.0
BURST = 200.0
MAX_CLIENTS = 10_000


class ClientLimiter:
    """Token buckets per client (thread- and greenlet-safe)."""

    def __init__(self, rate: float = RATE, burst: float = BURST, *,
                 max_clients: int = MAX_CLIENTS, clock: Clock = SYSTEM_CLOCK) -> None:
        self.rate, self.burst = rate, burst
        self._max_clients = max_clients
        self._clock = clock
        self._lock = threading.Lock()
        #: client -> (tokens left, monotonic time they were counted)
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def allow(self, client: str) -> bool:
        """Take one token from `client`'s bucket; False when it is empty."""
        now = self._clock.monotonic()
        with self._lock:
            tokens, then = self._buckets.pop(client, (self.burst, now))
            tokens = min(self.burst, tokens + (now - then) * self.rate)
            allowed = tokens >= 1.0
            self._buckets[client] = (tokens - 1.0 if allowed else tokens, now)
            while len(self._buckets) > self._max_clients:
                self._buckets.popitem(last=False)
        return allowed
