"""Password hashes: salted scrypt, compared in constant time, and a cache of recent successes.

Stored form (what `peloton auth hash-password` prints and the users file holds):

    scrypt$<log2 N>$<r>$<p>$<salt, base64>$<derived key, base64>

scrypt is deliberately slow and memory-hard (N=2^14, r=8: 16 MiB and tens of
milliseconds per check), so a stolen users file does not give passwords away
cheaply, unlike Peloton's unsalted SHA-256.  Because Peloton's BASIC clients
send the password on *every* call, verifying each one with scrypt would cost a
core per few dozen calls a second; `VerifiedCache` remembers a successful
(user, password) pair for a while as an HMAC under a per-process random key, so
the plain password is never kept and a repeated call costs one HMAC.

scrypt runs in C for tens of milliseconds without yielding; in a monkey-patched
daemon that would stop every greenlet (the job manager's engines, every other
call) for each password checked, so `VerifiedCache` runs it on a small
`BlockingPool` of native threads (hashlib releases the GIL), as SQLite's waits
are (peloton/common/blocking.py).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import threading

from peloton.common.blocking import BlockingPool
from peloton.common.clock import SYSTEM_CLOCK, Clock

SCHEME = "scrypt"
#: log2 of scrypt's N, r and p for new hashes.
LOG_N, BLOCK_R, PARALLEL_P = 14, 8, 1
_KEY_BYTES = 32
_MAX_LOG_N = 20
#: Native threads password checks run on (each check holds one core for tens of ms).
SCRYPT_THREADS = 2
#: A hash of nothing in particular: unknown users are checked against it, so that
#: "no such user" takes as long as "wrong password".
_DUMMY: str | None = None


class BadHash(ValueError):
    """A stored hash is not in the form above."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _derive(password: str, salt: bytes, log_n: int, r: int, p: int) -> bytes:
    n = 1 << log_n
    return hashlib.scrypt(password.encode("utf-8"), salt=salt, n=n, r=r, p=p,
                          maxmem=256 * n * r + (1 << 20), dklen=_KEY_BYTES)


def hash_password(password: str, *, log_n: int = LOG_N, salt: bytes | None = None) -> str:
    """The stored form of `password` (a fresh random salt unless one is given)."""
    salt = salt if salt is not None else secrets.token_bytes(16)
    key = _derive(password, salt, log_n, BLOCK_R, PARALLEL_P)
    return f"{SCHEME}${log_n}${BLOCK_R}${PARALLEL_P}${_b64(salt)}${_b64(key)}"


def parse_hash(encoded: str) -> tuple[int, int, int, bytes, bytes]:
    """(log2 N, r, p, salt, key) of a stored hash; BadHash when it is not one."""
    parts = encoded.split("$")
    if len(parts) != 6 or parts[0] != SCHEME:
        raise BadHash("expected scrypt$<logN>$<r>$<p>$<salt>$<key> "
                      "(made by `peloton auth hash-password`)")
    try:
        log_n, r, p = int(parts[1]), int(parts[2]), int(parts[3])
        salt = base64.b64decode(parts[4], validate=True)
        key = base64.b64decode(parts[5], validate=True)
    except ValueError:
        raise BadHash("the parameters, salt or key of the scrypt hash do not decode") from None
    if not (10 <= log_n <= _MAX_LOG_N and 1 <= r <= 32 and 1 <= p <= 16 and len(salt) >= 8
            and len(key) >= 16):
        raise BadHash("scrypt parameters out of range (logN 10..20, r 1..32, p 1..16, "
                      "salt of 8+ bytes)")
    return log_n, r, p, salt, key


def verify_password(password: str, encoded: str) -> bool:
    """Whether `password` matches the stored hash (constant-time comparison)."""
    log_n, r, p, salt, key = parse_hash(encoded)
    return hmac.compare_digest(_derive(password, salt, log_n, r, p)[:len(key)], key)


def burn_time(password: str) -> None:
    """Spend what a verification costs (for unknown users), and learn nothing."""
    global _DUMMY
    if _DUMMY is None:
        _DUMMY = hash_password("", salt=b"peloton-dummy-salt")
    verify_password(password, _DUMMY)


class VerifiedCache:
    """Recently verified (user, password) pairs, as keyed HMACs that expire after `ttl` s."""

    def __init__(self, ttl: float = 300.0, max_entries: int = 10_000,
                 clock: Clock = SYSTEM_CLOCK, threads: int = SCRYPT_THREADS) -> None:
        self.ttl = ttl
        self.max_entries = max_entries
        self._clock = clock
        self._key = secrets.token_bytes(32)
        self._seen: dict[bytes, float] = {}
        self._lock = threading.Lock()
        self._pool = BlockingPool(threads, "scrypt")

    def burn(self, password: str) -> None:
        """`burn_time`, off the hub (see the module docstring)."""
        self._pool.call(lambda: burn_time(password))

    def _digest(self, user: str, password: str, stored: str) -> bytes:
        # The stored hash is part of the key: a password changed in the users file
        # invalidates what was cached under the old one.
        msg = b"\0".join(s.encode("utf-8") for s in (user, password, stored))
        return hmac.new(self._key, msg, hashlib.sha256).digest()

    def check(self, user: str, password: str, stored: str) -> bool:
        """Whether the password is right: from the cache, else by scrypt (then cached)."""
        digest = self._digest(user, password, stored)
        now = self._clock.monotonic()
        with self._lock:
            until = self._seen.get(digest)
            if until is not None and until > now:
                return True
        if not self._pool.call(lambda: verify_password(password, stored)):
            return False
        with self._lock:
            if len(self._seen) >= self.max_entries:
                self._seen = {d: t for d, t in self._seen.items() if t > now}
                if len(self._seen) >= self.max_entries:
                    self._seen.clear()
            self._seen[digest] = now + self.ttl
        return True
