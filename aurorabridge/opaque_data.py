"""What the bridge remembers about an Aurora update, stored in the Peloton workflow.

Peloton keeps an opaque string with each workflow (`opaque_data`); the
bridge writes JSON there, in the shape Peloton's Go bridge used so either can
read the other's updates:

    {"update_id": uuid, "update_actions": [...], "update_metadata": [{"key","value"}],
     "start_job_update_msg": str}

plus fields of ours: `pulse_timeout_ms` (blockIfNoPulsesAfterMs), so the
pulse timer can re-arm after a bridge restart, and `aurora_settings`, the
update's effective JobUpdateSettings (update_settings.py), so details read
back what was sent.  Empty fields are omitted.

Actions, in order of occurrence: `start_pulsed` (the update began paused,
waiting for a first pulse), `pulse` (a pulse resumed it), `pulse_timeout`
(ours: the bridge paused it because pulses stopped), `pause` / `resume`
(ours: an explicit pause by the user, so a paused update is not mistaken for
one awaiting a pulse), `rollback`.  Whether an update awaits a pulse is
decided by the latest of the pulse-related actions, which reads Go-written
data the same way Go did (start_pulsed without a later pulse).

`aurora_events` (ours) records each update state change the bridge asked for,
in order: what was asked (an action above, or `start`, `abort`), by whom and
with which message (Aurora's AuditData).  Peloton's workflow events carry only
a state and a time; ptoa/updates.py matches them to these records to give
each JobUpdateEvent its status, user and message.  Entries made after a
`rollback` belong to the rollback's workflow (`rollback` true).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field, replace
from typing import Any

START_PULSED = "start_pulsed"
PULSE = "pulse"
PULSE_TIMEOUT = "pulse_timeout"
PAUSE = "pause"
RESUME = "resume"
ROLLBACK = "rollback"
START = "start"
ABORT = "abort"
SETTINGS_KEY = "aurora_settings"
EVENTS_KEY = "aurora_events"
_PULSE_STATE_ACTIONS = frozenset({START_PULSED, PULSE, PULSE_TIMEOUT, PAUSE, RESUME})


@dataclass(frozen=True, slots=True)
class Asked:
    """One update state change the bridge asked Peloton for, and who asked."""

    action: str
    #: The Aurora user ("" when nobody asked: a pulse, a pulse timeout).
    user: str = ""
    message: str = ""
    #: Asked of the rollback's workflow.
    rollback: bool = False

    def to_doc(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"action": self.action}
        if self.user:
            doc["user"] = self.user
        if self.message:
            doc["message"] = self.message
        if self.rollback:
            doc["rollback"] = True
        return doc


def _asked(doc: Any) -> Asked | None:
    if not isinstance(doc, dict) or not isinstance(doc.get("action"), str):
        return None
    return Asked(doc["action"], str(doc.get("user") or ""), str(doc.get("message") or ""),
                 bool(doc.get("rollback")))


@dataclass(frozen=True, slots=True)
class OpaqueData:
    """The decoded opaque data of one workflow."""

    update_id: str = ""
    actions: tuple[str, ...] = ()
    metadata: tuple[tuple[str, str], ...] = ()
    message: str = ""
    pulse_timeout_ms: int = 0
    #: The effective JobUpdateSettings as update_settings.to_doc wrote them (None: unknown).
    settings: dict[str, Any] | None = field(default=None, compare=False)
    extra: dict[str, Any] = field(default_factory=dict, compare=False)
    #: The state changes the bridge asked for, oldest first (see the module docstring).
    asked: tuple[Asked, ...] = field(default=(), compare=False)

    @staticmethod
    def new(metadata: tuple[tuple[str, str], ...], message: str, pulse_timeout_ms: int,
            settings: dict[str, Any] | None = None, user: str = "") -> OpaqueData:
        """Data for a new update with a fresh id, started by `user`."""
        actions = (START_PULSED,) if pulse_timeout_ms > 0 else ()
        return OpaqueData(str(uuid.uuid4()), actions, metadata, message, pulse_timeout_ms, settings,
                          asked=(Asked(START, user, message),))

    def with_action(self, action: str, user: str = "", message: str = "", *,
                    record: bool = True) -> OpaqueData:
        """A copy with `action` appended and, if it changes the update's state (`record`),
        recorded as asked by `user` with `message`."""
        rollback = self.rollback or action == ROLLBACK
        asked = (*self.asked, Asked(action, user, message, rollback)) if record else self.asked
        return replace(self, actions=(*self.actions, action), asked=asked)

    def asked_of(self, rollback: bool) -> tuple[Asked, ...]:
        """What was asked of the update's forward workflow, or of its rollback's."""
        return tuple(a for a in self.asked if a.rollback == rollback)

    @property
    def started_by(self) -> str:
        """The user who started the update ("" if unknown: an older bridge's update)."""
        return next((a.user for a in self.asked if a.action == START), "")

    @property
    def rollback(self) -> bool:
        """Whether the update has been rolled back."""
        return ROLLBACK in self.actions

    @property
    def pulsed(self) -> bool:
        """Whether the update needs pulses (blockIfNoPulsesAfterMs was set)."""
        return START_PULSED in self.actions

    @property
    def awaiting_pulse(self) -> bool:
        """Whether a pause of this update is the pulse kind (true only while paused)."""
        last = [a for a in self.actions if a in _PULSE_STATE_ACTIONS]
        return bool(last) and last[-1] in (START_PULSED, PULSE_TIMEOUT)

    def to_json(self) -> str:
        """Serialize, omitting empty fields, keeping fields we do not know."""
        doc: dict[str, Any] = dict(self.extra)
        if self.update_id:
            doc["update_id"] = self.update_id
        if self.actions:
            doc["update_actions"] = list(self.actions)
        if self.metadata:
            doc["update_metadata"] = [{"key": k, "value": v} for k, v in self.metadata]
        if self.message:
            doc["start_job_update_msg"] = self.message
        if self.pulse_timeout_ms:
            doc["pulse_timeout_ms"] = self.pulse_timeout_ms
        if self.settings is not None:
            doc[SETTINGS_KEY] = self.settings
        if self.asked:
            doc[EVENTS_KEY] = [a.to_doc() for a in self.asked]
        return json.dumps(doc, separators=(",", ":"), sort_keys=True)


def parse(data: str) -> OpaqueData:
    """Decode; empty or foreign (non-bridge) data yields an OpaqueData without update id."""
    if not data:
        return OpaqueData()
    try:
        doc = json.loads(data)
    except ValueError:
        return OpaqueData()
    if not isinstance(doc, dict):
        return OpaqueData()
    known = {"update_id", "update_actions", "update_metadata", "start_job_update_msg", "pulse_timeout_ms",
             SETTINGS_KEY, EVENTS_KEY}
    metadata = tuple((str(m.get("key", "")), str(m.get("value", "")))
                     for m in doc.get("update_metadata") or [] if isinstance(m, dict))
    timeout = doc.get("pulse_timeout_ms", 0)
    settings = doc.get(SETTINGS_KEY)
    asked = doc.get(EVENTS_KEY)
    return OpaqueData(
        update_id=str(doc.get("update_id", "")),
        actions=tuple(str(a) for a in doc.get("update_actions") or []),
        metadata=metadata,
        message=str(doc.get("start_job_update_msg", "")),
        pulse_timeout_ms=timeout if isinstance(timeout, int) else 0,
        settings=settings if isinstance(settings, dict) else None,
        extra={k: v for k, v in doc.items() if k not in known},
        asked=tuple(a for a in map(_asked, asked if isinstance(asked, list) else []) if a is not None),
    )
