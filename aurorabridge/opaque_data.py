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
SETTINGS_KEY = "aurora_settings"
_PULSE_STATE_ACTIONS = frozenset({START_PULSED, PULSE, PULSE_TIMEOUT, PAUSE, RESUME})


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

    @staticmethod
    def new(metadata: tuple[tuple[str, str], ...], message: str, pulse_timeout_ms: int,
            settings: dict[str, Any] | None = None) -> OpaqueData:
        """Data for a new update with a fresh id."""
        actions = (START_PULSED,) if pulse_timeout_ms > 0 else ()
        return OpaqueData(str(uuid.uuid4()), actions, metadata, message, pulse_timeout_ms, settings)

    def with_action(self, action: str) -> OpaqueData:
        """A copy with `action` appended."""
        return replace(self, actions=(*self.actions, action))

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
             SETTINGS_KEY}
    metadata = tuple((str(m.get("key", "")), str(m.get("value", "")))
                     for m in doc.get("update_metadata") or [] if isinstance(m, dict))
    timeout = doc.get("pulse_timeout_ms", 0)
    settings = doc.get(SETTINGS_KEY)
    return OpaqueData(
        update_id=str(doc.get("update_id", "")),
        actions=tuple(str(a) for a in doc.get("update_actions") or []),
        metadata=metadata,
        message=str(doc.get("start_job_update_msg", "")),
        pulse_timeout_ms=timeout if isinstance(timeout, int) else 0,
        settings=settings if isinstance(settings, dict) else None,
        extra={k: v for k, v in doc.items() if k not in known},
    )
