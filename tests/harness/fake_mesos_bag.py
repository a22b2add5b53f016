"""Resource arithmetic for the fake Mesos master: amounts keyed by (name, role, revocable).

Mesos keeps resources of one name apart when their role, reservation or
revocability differ; a task may use an offered resource only with the same
key.  Scalars add up; ranges (ports) are sets of numbers.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

Json = dict[str, Any]
Key = tuple[str, str, bool]


class Bag:
    """A multiset of resources."""

    def __init__(self, resources: Iterable[Json] = ()) -> None:
        self.scalars: dict[Key, float] = {}
        self.ranges: dict[Key, set[int]] = {}
        self.add_all(resources)

    @staticmethod
    def role_of(res: Json) -> str:
        """The role a resource is reserved to ("*" when unreserved)."""
        if res.get("reservations"):
            return str(res["reservations"][-1].get("role", "*"))
        return str(res.get("role", "*"))

    @staticmethod
    def key(res: Json) -> Key:
        return (str(res["name"]), Bag.role_of(res), "revocable" in res)

    def add_all(self, resources: Iterable[Json]) -> None:
        for res in resources:
            key = self.key(res)
            if res.get("type", "SCALAR") == "SCALAR":
                self.scalars[key] = self.scalars.get(key, 0.0) + float(res["scalar"]["value"])
            elif res.get("type") == "RANGES":
                ports = self.ranges.setdefault(key, set())
                for span in res.get("ranges", {}).get("range", []):
                    ports.update(range(int(span["begin"]), int(span["end"]) + 1))

    def covers(self, other: Bag) -> bool:
        return (all(self.scalars.get(k, 0.0) + 1e-6 >= v for k, v in other.scalars.items())
                and all(v <= self.ranges.get(k, set()) for k, v in other.ranges.items()))

    def subtract(self, other: Bag) -> None:
        for k, v in other.scalars.items():
            self.scalars[k] = self.scalars.get(k, 0.0) - v
        for k, ports in other.ranges.items():
            self.ranges[k] = self.ranges.get(k, set()) - ports

    def useful(self) -> bool:
        """Worth offering: Mesos' minimum allocatable resources (0.01 cpus or 32 MB)."""
        cpus = sum(v for (n, _, _), v in self.scalars.items() if n == "cpus")
        mem = sum(v for (n, _, _), v in self.scalars.items() if n == "mem")
        return cpus >= 0.01 or mem >= 32

    def to_json(self, allocation_role: str) -> list[Json]:
        out: list[Json] = []
        for (name, role, revocable), value in self.scalars.items():
            if value > 1e-6:
                out.append(_entry({"name": name, "type": "SCALAR",
                                   "scalar": {"value": round(value, 3)}}, role, revocable))
        for (name, role, revocable), ports in self.ranges.items():
            if ports:
                out.append(_entry({"name": name, "type": "RANGES",
                                   "ranges": {"range": _spans(ports)}}, role, revocable))
        for res in out:
            res["allocation_info"] = {"role": allocation_role}
        return out


def _entry(res: Json, role: str, revocable: bool) -> Json:
    res["role"] = role
    if role != "*":
        res["reservations"] = [{"type": "STATIC", "role": role}]
    if revocable:
        res["revocable"] = {}
    return res


def _spans(ports: set[int]) -> list[Json]:
    spans: list[Json] = []
    for port in sorted(ports):
        if spans and spans[-1]["end"] == port - 1:
            spans[-1]["end"] = port
        else:
            spans.append({"begin": port, "end": port})
    return spans
