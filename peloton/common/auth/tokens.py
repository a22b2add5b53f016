"""Login tokens: what `peloton login` and the web UI keep instead of a password.

A token is `pt1.<payload>.<signature>`: the payload (base64url JSON) names the
user, when it was issued and when it expires; the signature is HMAC-SHA256 of
the payload under the cluster's token key.  Any daemon holding the key checks
a token with one HMAC, no lookup.  A token carries no role: the role is read
from the users file when the token is used, so changing a user's role takes
effect at once; removing the user (or rotating the key) revokes its tokens.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from peloton.common.clock import SYSTEM_CLOCK, Clock
from peloton.core.errors import InvalidArgument, Unauthenticated

PREFIX = "pt1"
DEFAULT_TTL_SECS = 12 * 3600.0
KEY_BYTES = 32


@dataclass(frozen=True, slots=True)
class TokenClaims:
    """What a valid token says."""

    user: str
    issued: float
    expires: float


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class TokenSigner:
    """Issues and checks tokens under one key."""

    def __init__(self, key: bytes, *, ttl_secs: float = DEFAULT_TTL_SECS,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        if len(key) < 16:
            raise InvalidArgument("the token key must be at least 16 bytes", field="token_key")
        self._key = key
        self.ttl_secs = ttl_secs
        self._clock = clock

    def _sign(self, payload: str) -> str:
        return _b64(hmac.new(self._key, payload.encode("ascii"), hashlib.sha256).digest())

    def issue(self, user: str, ttl_secs: float | None = None) -> str:
        """A token for `user`, valid for `ttl_secs` (default: the signer's)."""
        now = self._clock.wall()  # tokens carry wall times: other daemons check them
        claims = {"u": user, "iat": int(now), "exp": int(now + (ttl_secs or self.ttl_secs)),
                  "n": _b64(secrets.token_bytes(6))}
        payload = _b64(json.dumps(claims, separators=(",", ":")).encode("utf-8"))
        return f"{PREFIX}.{payload}.{self._sign(payload)}"

    def verify(self, token: str) -> TokenClaims:
        """The claims of a valid token; Unauthenticated if it is forged, damaged or expired."""
        parts = token.split(".")
        if len(parts) != 3 or parts[0] != PREFIX:
            raise Unauthenticated("malformed token; run `peloton login` again")
        payload, signature = parts[1], parts[2]
        if not hmac.compare_digest(self._sign(payload), signature):
            raise Unauthenticated("invalid token (not issued by this cluster, or its key changed); "
                                  "run `peloton login` again")
        try:
            doc = json.loads(_unb64(payload))
            claims = TokenClaims(str(doc["u"]), float(doc["iat"]), float(doc["exp"]))
        except (ValueError, KeyError, TypeError):
            raise Unauthenticated("malformed token; run `peloton login` again") from None
        if claims.expires <= self._clock.wall():
            raise Unauthenticated("token expired; run `peloton login` again")
        return claims


def load_or_create_key(path: Path) -> bytes:
    """The token key in `path` (created with mode 0600, random, if missing)."""
    try:
        data = path.read_bytes().strip()
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        key = secrets.token_hex(KEY_BYTES).encode("ascii")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, key + b"\n")
        finally:
            os.close(fd)
        return key
    check_private(path)
    if len(data) < 16:
        raise InvalidArgument(f"token key file {path} holds fewer than 16 bytes", field="token_key_file")
    return data


def check_private(path: Path) -> None:
    """Refuse a secret file others may read or write (as ssh does with its keys)."""
    mode = path.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise InvalidArgument(f"{path} is readable or writable by others (mode "
                              f"{stat.filemode(mode)}); chmod 600 it", field=str(path))
