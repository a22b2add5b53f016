"""Browser sessions of the web UI: a random id in an HttpOnly cookie, a CSRF token, a login.

Every browser gets a session on its first request, logged in or not: the
session's CSRF token is what every POST must carry (the page embeds it,
scripts send it as `X-CSRF-Token`, the login form as a hidden field), so a
page elsewhere cannot make a visitor's browser act.  Logging in replaces the
session (a new id, so a planted cookie cannot ride a login) and keeps the
user's Peloton login token server-side: the browser never sees it.
Sessions live in memory, are bounded in number and expire; a restart of
the UI logs everyone out.
"""

from __future__ import annotations

import secrets
import threading
from collections import OrderedDict
from dataclasses import dataclass

from peloton.common.clock import SYSTEM_CLOCK, Clock

COOKIE = "peloton_session"
#: Idle sessions (anonymous ones especially) are dropped after this long.
IDLE_SECS = 12 * 3600.0
MAX_SESSIONS = 10_000


@dataclass
class Session:
    """One browser's session."""

    sid: str
    csrf: str
    created: float
    seen: float
    username: str = ""
    token: str = ""
    token_expires: float = 0.0

    def logged_in(self, now: float) -> bool:
        """Whether a user logged in and the token has not expired at `now` (wall seconds)."""
        return bool(self.token) and self.token_expires > now


class Sessions:
    """The session table (thread- and greenlet-safe)."""

    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._table: OrderedDict[str, Session] = OrderedDict()

    def logged_in(self, session: Session) -> bool:
        """Whether `session` has a user whose login token has not expired."""
        return session.logged_in(self._clock.wall())

    def get(self, sid: str) -> Session | None:
        """The live session with this id (None: unknown or expired)."""
        now = self._clock.monotonic()
        with self._lock:
            session = self._table.get(sid) if sid else None
            if session is None:
                return None
            if now - session.seen > IDLE_SECS:
                del self._table[sid]
                return None
            session.seen = now
            self._table.move_to_end(sid)
            return session

    def new(self) -> Session:
        """A fresh anonymous session."""
        now = self._clock.monotonic()
        session = Session(secrets.token_urlsafe(32), secrets.token_urlsafe(32), now, now)
        with self._lock:
            self._table[session.sid] = session
            while len(self._table) > MAX_SESSIONS:
                self._table.popitem(last=False)
        return session

    def login(self, old: Session, username: str, token: str, expires: float) -> Session:
        """Replace `old` by a logged-in session (new id and CSRF token)."""
        self.drop(old.sid)
        session = self.new()
        session.username, session.token, session.token_expires = username, token, expires
        return session

    def drop(self, sid: str) -> None:
        """Forget a session (log out)."""
        with self._lock:
            self._table.pop(sid, None)
