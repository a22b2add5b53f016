"""The offers the Mesos backend holds, and the resources of launches cut out of them.

An offer is Mesos' permission to launch on an agent.  The host manager,
not Mesos, decides where runs go (its books hold each agent's capacity and
what runs there), so the backend keeps every offer it gets: then what
Mesos has free is exactly what the backend holds, and a launch finds the
room its books promised.  A launch ACCEPTs every held offer of the agent;
the part the runs do not use goes back to Mesos without a refuse filter and
returns in the next offer.  Offers held longer than the hold time are
declined, so a framework with nothing to run does not pin a cluster forever.

Resources of a run are cut from the offered resources entry by entry,
keeping each entry's role, reservation and allocation info (Mesos accepts a
task's resources only as they were offered): regular runs take regular
cpus, revocable runs revocable cpus; memory, disk, gpus and ports are never
revocable.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass

from peloton.core.model.sched import LaunchSpec
from peloton.hostmgr.backends.mesos_wire import Json, usable, value_of
from peloton.hostmgr.backends.task_env import task_ports

#: Scalars are compared with Mesos' precision (it keeps three decimals).
_PRECISION = 0.0005


@dataclass(frozen=True, slots=True)
class HeldOffer:
    """One offer as held: its id, agent, resources and when it came."""

    offer_id: str
    agent_id: str
    hostname: str
    resources: tuple[Json, ...]
    received: float


class OfferBook:
    """Held offers by id and by agent.  Not thread-safe (the backend's lock guards it)."""

    def __init__(self) -> None:
        self._offers: dict[str, HeldOffer] = {}

    def __len__(self) -> int:
        return len(self._offers)

    def add(self, offer: Json, now: float) -> HeldOffer:
        held = HeldOffer(value_of(offer, "id"), value_of(offer, "agent_id"),
                         str(offer.get("hostname", "")), tuple(offer.get("resources", [])), now)
        self._offers[held.offer_id] = held
        return held

    def remove(self, offer_id: str) -> HeldOffer | None:
        """Forget one offer (rescinded, or handed back); None if it was not held."""
        return self._offers.pop(offer_id, None)

    def of(self, agent_id: str) -> list[HeldOffer]:
        """Every offer held for one agent, oldest first."""
        return [o for o in self._offers.values() if o.agent_id == agent_id]

    def take(self, offers: Sequence[HeldOffer]) -> None:
        """Stop holding these (they are being accepted or declined)."""
        for offer in offers:
            self._offers.pop(offer.offer_id, None)

    def expired(self, now: float, hold_secs: float) -> list[HeldOffer]:
        """Offers held for `hold_secs` or longer, removed from the book."""
        old = [o for o in self._offers.values() if now - o.received >= hold_secs]
        self.take(old)
        return old

    def clear(self) -> list[HeldOffer]:
        """Forget every offer (they are void once the subscription is gone); returns them."""
        offers, self._offers = list(self._offers.values()), {}
        return offers


@dataclass(slots=True)
class _Slice:
    template: Json           # the offered entry without its amount
    name: str
    revocable: bool
    left: float = 0.0
    ports: set[int] | None = None


class Picker:
    """Cuts runs' resources out of one agent's offers, run by run, until they run out."""

    def __init__(self, offers: Sequence[HeldOffer], role: str) -> None:
        self._slices: list[_Slice] = []
        for offer in offers:
            for res in offer.resources:
                if not usable(res, role):
                    continue
                template = {k: copy.deepcopy(v) for k, v in res.items()
                            if k not in ("scalar", "ranges")}
                piece = _Slice(template, str(res.get("name")), "revocable" in res)
                if res.get("type", "SCALAR") == "SCALAR":
                    piece.left = float(res.get("scalar", {}).get("value", 0.0))
                elif res.get("type") == "RANGES":
                    piece.ports = {p for s in res.get("ranges", {}).get("range", [])
                                   for p in range(int(s["begin"]), int(s["end"]) + 1)}
                else:
                    continue
                self._slices.append(piece)

    def take(self, task: LaunchSpec) -> list[Json] | None:
        """The resources for one run, taken from what is left; None (nothing taken) if it
        does not fit."""
        r = task.spec.resources
        needs = [("cpus", r.cpu, task.spec.revocable), ("mem", r.mem_mb, False),
                 ("disk", r.disk_mb, False), ("gpus", r.gpu, False)]
        plan: list[tuple[_Slice, float]] = []
        for name, amount, revocable in needs:
            left = round(amount, 3)
            for piece in self._slices:
                if left <= _PRECISION:
                    break
                used = sum(a for p, a in plan if p is piece)
                room = piece.left - used
                if piece.name == name and piece.revocable == revocable and room > _PRECISION:
                    use = min(left, room)
                    plan.append((piece, use))
                    left -= use
            if left > _PRECISION:
                return None
        port_plan: list[tuple[_Slice, int]] = []
        for _, number, _ in task_ports(task):
            found = next((p for p in self._slices if p.name == "ports" and not p.revocable
                          and p.ports is not None and number in p.ports
                          and all(q != (p, number) for q in port_plan)), None)
            if found is None:
                return None
            port_plan.append((found, number))
        return self._commit(plan, port_plan)

    def _commit(self, plan: list[tuple[_Slice, float]],
                port_plan: list[tuple[_Slice, int]]) -> list[Json]:
        out: list[Json] = []
        for piece, use in plan:
            piece.left -= use
            out.append({**copy.deepcopy(piece.template), "scalar": {"value": round(use, 3)}})
        by_slice: dict[int, tuple[_Slice, list[int]]] = {}
        for piece, number in port_plan:
            assert piece.ports is not None
            piece.ports.discard(number)
            by_slice.setdefault(id(piece), (piece, []))[1].append(number)
        for piece, numbers in by_slice.values():
            out.append({**copy.deepcopy(piece.template), "ranges": {
                "range": [{"begin": n, "end": n} for n in sorted(numbers)]}})
        return out
