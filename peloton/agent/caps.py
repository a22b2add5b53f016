"""Sandbox read capabilities and the agent's call token.

Who may read a sandbox is decided by the job APIs (BrowseSandbox is
authorized like any call), not by the agent, which knows no users.  So the
agent hands out capabilities: every entry its ListSandbox returns is
prefixed with `cap-<expiry>-<signature>/`, an HMAC of (run id, expiry) under
a key only this agent process holds.  The job manager turns entries into the
paths BrowseSandbox answers (`<run id>/cap-.../stdout`), clients fetch those
paths from the agent's file server as they always did, and the file server
serves a path only under a valid, unexpired capability for that very run.
A task on the same machine, which can reach the file server but not the
AgentService (it lacks the call token), cannot read anyone's sandbox.

The call token is the other half: a random secret the agent sends the host
manager in its registration; every AgentService call must carry it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

from peloton.common.clock import SYSTEM_CLOCK, Clock

PREFIX = "cap-"
DEFAULT_TTL_SECS = 3600.0
TOKEN_KEY = "peloton-agent-token"


class SandboxCaps:
    """Mints and checks capabilities for one agent process."""

    def __init__(self, key: bytes | None = None, *, ttl_secs: float = DEFAULT_TTL_SECS,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self._key = key or secrets.token_bytes(32)
        self.ttl_secs = ttl_secs
        self._clock = clock

    def _sign(self, run_id: str, expires: int) -> str:
        mac = hmac.new(self._key, f"{run_id}:{expires}".encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(mac[:18]).decode("ascii")

    def mint(self, run_id: str) -> str:
        """A capability to read `run_id`'s sandbox until the ttl passes."""
        expires = int(self._clock.wall() + self.ttl_secs)
        return f"{PREFIX}{expires}-{self._sign(run_id, expires)}"

    def valid(self, run_id: str, cap: str) -> bool:
        """Whether `cap` grants reading `run_id`'s sandbox now."""
        if not cap.startswith(PREFIX):
            return False
        expires_text, _, signature = cap[len(PREFIX):].partition("-")
        if not expires_text.isdigit() or int(expires_text) < self._clock.wall():
            return False
        return hmac.compare_digest(self._sign(run_id, int(expires_text)), signature)


def strip_cap(rel: str) -> str:
    """A sandbox-relative path without its leading capability component, if any."""
    head, _, rest = rel.lstrip("/").partition("/")
    return rest if head.startswith(PREFIX) else rel


def new_call_token() -> str:
    """A fresh call token (see the module docstring)."""
    return secrets.token_urlsafe(32)
