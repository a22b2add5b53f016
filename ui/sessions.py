"""Browser sessions of the web UI: a random id in an HttpOnly cookie, a CSRF token, a login.

Every browser gets a session on its first request, logged in or not: the
session's CSRF token is what every POST must carry (the page embeds it,
scripts send it as `X-CSRF-Token`, the login form as a hidden field), so a
page elsewhere cannot make a visitor's browser act.  Logging in replaces the
session (a new id, so a planted cookie cannot ride a login) and keeps the
user's Peloton login token server-side: the browser never sees it.
Sessions live in memory, are bounded in number and expire; a restart of
the UI logs everyone out.

Anonymous and signed-in sessions are kept in two tables, each bounded and
evicting its own least recently used: anyone can make anonymous sessions
(one per cookie-less request), so a flood of them may only push out other
anonymous sessions, never a signed-in user's.  Signed-in sessions cost a
successful login each.
"""

from __future__ import annotations

import secrets
import threading
from collections import OrderedDict
from dataclasses import dataclass

from peloton.common.clock import SYSTEM_CLOCK, Clock

COOKIE = "peloton_session"
#: Idle signed-in sessions are dropped after this long.
IDLE_SECS = 12 * 3600.0
#: Idle anonymous sessions (a login page left open) are dropped after this long.
ANONYMOUS_IDLE_SECS = 3600.0
#: Bounds of each table (see the module docstring).
MAX_SESSIONS = 10_000
MAX_ANONYMOUS = 10_000


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

    def __init__(self, clock: Clock = SYSTEM_CLOCK, *, max_signed_in: int = MAX_SESSIONS,
                 max_anonymous: int = MAX_ANONYMOUS) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._signed_in: OrderedDict[str, Session] = OrderedDict()
        self._anonymous: OrderedDict[str, Session] = OrderedDict()
        self._max_signed_in = max_signed_in
        self._max_anonymous = max_anonymous

    def logged_in(self, session: Session) -> bool:
        """Whether `session` has a user whose login token has not expired."""
        return session.logged_in(self._clock.wall())

    def get(self, sid: str) -> Session | None:
        """The live session with this id (None: unknown or expired)."""
        if not sid:
            return None
        now = self._clock.monotonic()
        with self._lock:
            for table, idle in ((self._signed_in, IDLE_SECS),
                                (self._anonymous, ANONYMOUS_IDLE_SECS)):
                session = table.get(sid)
                if session is None:
                    continue
                if now - session.seen > idle:
                    del table[sid]
                    return None
                session.seen = now
                table.move_to_end(sid)
                return session
        return None

    def new(self) -> Session:
        """A fresh anonymous session."""
        session = self._make()
        self._put(self._anonymous, session, self._max_anonymous)
        return session

    def login(self, old: Session, username: str, token: str, expires: float) -> Session:
        """Replace `old` by a logged-in session (new id and CSRF token)."""
        self.drop(old.sid)
        session = self._make()
        session.username, session.token, session.token_expires = username, token, expires
        self._put(self._signed_in, session, self._max_signed_in)
        return session

    def drop(self, sid: str) -> None:
        """Forget a session (log out)."""
        with self._lock:
            self._signed_in.pop(sid, None)
            self._anonymous.pop(sid, None)

    def counts(self) -> tuple[int, int]:
        """(signed-in, anonymous) sessions held now."""
        with self._lock:
            return len(self._signed_in), len(self._anonymous)

    def _make(self) -> Session:
        now = self._clock.monotonic()
        return Session(secrets.token_urlsafe(32), secrets.token_urlsafe(32), now, now)

    def _put(self, table: OrderedDict[str, Session], session: Session, bound: int) -> None:
        with self._lock:
            table[session.sid] = session
            while len(table) > bound:
                table.popitem(last=False)
