"""The placer's mutable view of the cluster: hosts, their free capacity, and a sorted index.

Hosts arrive as `HostOffer` snapshots; the index copies them into mutable
`HostRecord`s that placement debits as it assigns tasks, so one index
serves batch after batch until the daemon refreshes a host from a newer
offer (`upsert`).  Static facts (state, labels, gpu, exclusive) are shared
per `HostClass`, so static filter verdicts are computed once per class.

Free capacity is held in the fixed-point units of `Resources` (milli-cores,
thousandths of a MB or gpu), so debits and credits are exact and a host
that gave back everything it took is exactly as free as before.

The index keeps, per partition (hosts with and without gpus; only hosts
that are UP), two sorted lists of integer keys, by free cpu and by free
revocable cpu.  A key is `free milli-cores << 20 | host index`: integer
compare, unique, and ordered by milli-cores.  Best fit is then a bisect
plus a short forward scan, least loaded a scan from the top, and each
assignment re-keys one host (O(log n) search plus a memmove).

Invariants: every UP host appears exactly once in each list of its
partition, under the key of its current free cpu / revocable cpu; hosts
that are not UP appear in none; every host is in `by_class` under its
class; `generation` grows whenever capacity comes back (a credit, or a
host added or refreshed), so "found no host" stays true within one
generation.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from peloton.core.errors import InvalidArgument
from peloton.core.model.constraints import Label
from peloton.core.model.host import EXCLUSIVE_ATTRIBUTE, HostOffer
from peloton.core.model.resources import Resources, to_units
from peloton.core.placement.portpool import PortPool
from peloton.core.states import HostState

INDEX_BITS = 20
INDEX_MASK = (1 << INDEX_BITS) - 1
MAX_HOSTS = 1 << INDEX_BITS


def key_of(free: int, idx: int) -> int:
    """The sort key of a host with `free` milli-cores at position `idx`."""
    return ((free if free > 0 else 0) << INDEX_BITS) | idx


def lower_key(cpu: int) -> int:
    """Smallest key a host with at least `cpu` free milli-cores can have (exact)."""
    return (cpu if cpu > 0 else 0) << INDEX_BITS


@dataclass(frozen=True, slots=True)
class IndexLayout:
    """Where each host sits in a `HostIndex`: ties between equally free hosts break by
    position, so two indexes with the same hosts place alike only with the same layout.

    `positions` are (hostname, position) in the index's own order (the order hosts leave
    it in when a sync drops several at once); `size` is how many positions exist; `free`
    the positions left empty, in the order they are reused (last first).  A layout depends
    on the history of hosts joining and leaving the lease, which is why the forecast
    carries it (peloton/core/forecast/model.py, `HostRotation`).
    """

    positions: tuple[tuple[str, int], ...]
    size: int
    free: tuple[int, ...]


class HostClass:
    """Static facts shared by hosts that look alike to every static filter."""

    __slots__ = ("class_id", "exclusive", "has_gpu", "label_counts", "labels", "state")

    def __init__(self, class_id: int, state: HostState, labels: tuple[Label, ...],
                 has_gpu: bool) -> None:
        self.class_id = class_id
        self.state = state
        self.labels = labels
        self.label_counts: dict[Label, int] = dict(Counter(labels))
        self.has_gpu = has_gpu
        self.exclusive = any(lb.key == EXCLUSIVE_ATTRIBUTE for lb in labels)


class HostRecord:
    """One host's free capacity (fixed-point units) as placement debits it."""

    __slots__ = (
        "agent_id",
        "capacity",
        "cls",
        "cpu",
        "cpu_key",
        "disk",
        "gpu",
        "hostname",
        "idx",
        "mem",
        "ports",
        "rcpu",
        "rcpu_key",
        "task_labels",
    )

    def __init__(self, idx: int, offer: HostOffer, cls: HostClass) -> None:
        self.idx = idx
        self.hostname = offer.hostname
        self.agent_id = offer.agent_id
        self.capacity = offer.capacity
        self.cpu, self.mem, self.disk, self.gpu = offer.available.units
        self.rcpu = to_units(offer.revocable_cpu)
        self.ports = PortPool(offer.ports)
        self.cls = cls
        self.task_labels: dict[Label, int] = dict(offer.task_labels)
        self.cpu_key = key_of(self.cpu, idx)
        self.rcpu_key = key_of(self.rcpu, idx)

    def free(self) -> Resources:
        """Free non-revocable resources now."""
        return Resources.from_units(self.cpu, self.mem, self.disk, self.gpu)


class Partition:
    """UP hosts of one gpu-ness, sorted by free cpu and by free revocable cpu."""

    __slots__ = ("cpu_keys", "rcpu_keys")

    def __init__(self) -> None:
        self.cpu_keys: list[int] = []
        self.rcpu_keys: list[int] = []


def _remove_key(keys: list[int], key: int) -> None:
    i = bisect.bisect_left(keys, key)
    if i == len(keys) or keys[i] != key:
        raise AssertionError("host index out of step with its keys")
    del keys[i]


class HostIndex:
    """Hosts by name and by position, with the sorted partitions placement searches."""

    def __init__(self, offers: Iterable[HostOffer] = ()) -> None:
        self.hosts: list[HostRecord | None] = []
        self.by_name: dict[str, HostRecord] = {}
        self.partitions = {False: Partition(), True: Partition()}
        self._classes: dict[tuple[HostState, tuple[Label, ...], bool], HostClass] = {}
        #: class id -> its hosts by name (reports count whole classes at once).
        self.by_class: dict[int, dict[str, HostRecord]] = {}
        self._free_slots: list[int] = []
        #: Grows whenever capacity is given back or a host is (re)added: a task that
        #: found no host at one generation finds none later in the same generation.
        self.generation = 0
        #: Grows whenever any host's task labels may have changed (DOMAIN-limit sums).
        self.task_label_version = 0
        for offer in offers:
            self.upsert(offer)

    def __len__(self) -> int:
        return len(self.by_name)

    @classmethod
    def arranged(cls, layout: IndexLayout, offers: Mapping[str, HostOffer]) -> HostIndex:
        """An index holding `offers` at the positions of `layout` (hosts of the layout
        without an offer are left out, their positions free; offers of hosts not in the
        layout are ignored)."""
        index = cls()
        index.hosts = [None] * layout.size
        index._free_slots = list(layout.free)
        missing = []
        for name, idx in layout.positions:
            offer = offers.get(name)
            if offer is None:
                missing.append(idx)
                continue
            index._free_slots.append(idx)  # upsert takes the last free position
            index.upsert(offer)
        # A host gone since keeps nothing: its position is reused before the older free ones.
        index._free_slots.extend(missing)
        return index

    def layout(self) -> IndexLayout:
        """Where each host sits now (see `IndexLayout`)."""
        return IndexLayout(tuple((name, rec.idx) for name, rec in self.by_name.items()),
                           len(self.hosts), tuple(self._free_slots))

    def records(self) -> Iterator[HostRecord]:
        """Every host, in index order."""
        return (h for h in self.hosts if h is not None)

    def class_count(self) -> int:
        """How many distinct host classes exist (static verdicts are cached per class)."""
        return len(self._classes)

    def upsert(self, offer: HostOffer) -> HostRecord:
        """Add a host or replace its snapshot (e.g. a fresher offer from the host manager)."""
        old = self.by_name.get(offer.hostname)
        if old is not None:
            self._unlink(old)
            del self.by_class[old.cls.class_id][old.hostname]
            idx = old.idx
        elif self._free_slots:
            idx = self._free_slots.pop()
        else:
            idx = len(self.hosts)
            if idx >= MAX_HOSTS:
                raise InvalidArgument(f"at most {MAX_HOSTS} hosts per index", field="hosts")
            self.hosts.append(None)
        labels = tuple(sorted(offer.labels))
        ckey = (offer.state, labels, offer.has_gpu)
        cls = self._classes.get(ckey)
        if cls is None:
            cls = self._classes[ckey] = HostClass(len(self._classes), *ckey)
        rec = HostRecord(idx, offer, cls)
        self.generation += 1
        self.task_label_version += 1
        self.hosts[idx] = rec
        self.by_name[offer.hostname] = rec
        self.by_class.setdefault(cls.class_id, {})[rec.hostname] = rec
        self._link(rec)
        return rec

    def remove(self, hostname: str) -> None:
        """Forget a host (it left the cluster); unknown names are ignored."""
        rec = self.by_name.pop(hostname, None)
        if rec is None:
            return
        self._unlink(rec)
        del self.by_class[rec.cls.class_id][hostname]
        self.hosts[rec.idx] = None
        self._free_slots.append(rec.idx)
        self.task_label_version += 1

    def _link(self, rec: HostRecord) -> None:
        if rec.cls.state is not HostState.UP:
            return
        part = self.partitions[rec.cls.has_gpu]
        bisect.insort(part.cpu_keys, rec.cpu_key)
        bisect.insort(part.rcpu_keys, rec.rcpu_key)

    def _unlink(self, rec: HostRecord) -> None:
        if rec.cls.state is not HostState.UP:
            return
        part = self.partitions[rec.cls.has_gpu]
        _remove_key(part.cpu_keys, rec.cpu_key)
        _remove_key(part.rcpu_keys, rec.rcpu_key)

    def debit(self, rec: HostRecord, res: Resources, revocable: bool, ports: int,
              labels: tuple[Label, ...], sign: int = 1,
              given_ports: tuple[int, ...] = (), port_draw: int = 0) -> tuple[int, ...]:
        """Take (sign 1) or give back (sign -1) one task's resources, ports and labels.

        Returns the ports taken, from where `port_draw` points in the host's free ports
        (see portpool.py); empty when giving back, where `given_ports` are the ones to
        return.  Keeps the partition keys in step.
        """
        up = rec.cls.state is HostState.UP
        part = self.partitions[rec.cls.has_gpu]
        cpu, mem, disk, gpu = res.units
        if sign < 0:
            cpu, mem, disk, gpu = -cpu, -mem, -disk, -gpu
        if revocable:
            rec.rcpu -= cpu
            if up:
                _remove_key(part.rcpu_keys, rec.rcpu_key)
            rec.rcpu_key = key_of(rec.rcpu, rec.idx)
            if up:
                bisect.insort(part.rcpu_keys, rec.rcpu_key)
        elif cpu:
            rec.cpu -= cpu
            if up:
                _remove_key(part.cpu_keys, rec.cpu_key)
            rec.cpu_key = key_of(rec.cpu, rec.idx)
            if up:
                bisect.insort(part.cpu_keys, rec.cpu_key)
        rec.mem -= mem
        rec.disk -= disk
        rec.gpu -= gpu
        counts = rec.task_labels
        if labels:
            self.task_label_version += 1
        step = 1 if sign > 0 else -1
        for lb in labels:
            n = counts.get(lb, 0) + step
            if n:
                counts[lb] = n
            else:
                del counts[lb]
        if sign > 0:
            return rec.ports.take(ports, port_draw) if ports else ()
        self.generation += 1
        if given_ports:
            rec.ports.give(given_ports)
        return ()
