"""Refuse a job whose tasks could never run, at create and on update (one call from the ops).

The judgement is the core's (peloton/core/feasibility.py); this asks the
resource manager whether the pool's limits could ever admit the job's
largest gang (`validate_pool` with the need) and the host manager what
every host could hold (`host_shapes`).  A job labelled
`peloton/queue-anyway=true` (on the job or a task; Aurora Metadata works
too) is only checked for a valid pool and queued: hosts may join later, a
limit may be raised.

The host shapes may come from a `ShapesCache` (JobOps keeps one): every create
asked the host manager for every host's shape (10,000 at the scale shape), one
more call to a busy daemon and a decode on the job manager's hub per create.
A cached answer is only trusted to accept a job: a job it would refuse is judged
again on shapes read now, so a host that joined meanwhile is never missed; a
host that left within `SHAPES_TTL` may let a job in that no host can hold, as a
host leaving just after the check always could.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import gevent
import gevent.event

from peloton.core.errors import InvalidArgument, Unavailable
from peloton.core.feasibility import (
    QUEUE_ANYWAY,
    HostShape,
    Infeasible,
    admission_need,
    job_asks_to_queue,
    job_never_fits,
)
from peloton.core.model.job import JobSpec
from peloton.core.model.resources import Resources
from peloton.core.ports import HostManagerPort

#: Seconds a `ShapesCache` answers from its last read of the host manager.
SHAPES_TTL = 10.0

#: What every refusal adds, so the user knows the way out.
HINT = (f"Ask for less, or label the job {QUEUE_ANYWAY}=true (peloton job create "
        "--queue-anyway) to queue it until a host that can hold it joins.")


class PoolValidator(Protocol):
    """What the checks need of the resource manager (ResourceManagerPort has it)."""

    def validate_pool(self, pool_id: str, need: Resources | None = None) -> None:
        """As ResourceManagerPort.validate_pool."""


class _Flight:
    """One resource manager call, and every check that rides it."""

    __slots__ = ("done", "error")

    def __init__(self) -> None:
        self.done = gevent.event.Event()
        self.error: Exception | None = None


class PoolChecks:
    """`validate_pool`, with checks of one pool and need made at the same time sharing one
    resource manager call (JobOps keeps one).

    A check rides the next call *sent after it arrived*, never one already on its way, so
    its answer is as fresh as a call of its own: the first check of a pool and need is sent
    at once; checks arriving while it is out wait for it to land and go together in the
    next one.  A burst of creates (32 writers resuming at once after a member's handover)
    made 32 calls to a resource manager busy with the takeover's recovery; now two or
    three.  The answer, a refusal included, is each rider's."""

    def __init__(self, resmgr: PoolValidator) -> None:
        self.resmgr = resmgr
        #: (pool, need) -> [the flight in the air, the next one boarding (or None)].
        self._slots: dict[tuple[str, Resources | None], list[_Flight | None]] = {}

    def validate_pool(self, pool_id: str, need: Resources | None = None) -> None:
        """As ResourceManagerPort.validate_pool."""
        key = (pool_id, need)
        slot = self._slots.get(key)
        if slot is None:
            flight = _Flight()
            self._slots[key] = [flight, None]
            self._fly(key, flight)
        else:
            boarding = slot[1]
            if boarding is None:
                boarding = slot[1] = _Flight()
            flight = boarding
            flight.done.wait()
        if flight.error is not None:
            raise flight.error

    def _fly(self, key: tuple[str, Resources | None], flight: _Flight) -> None:
        try:
            self.resmgr.validate_pool(*key)
        except Exception as exc:  # every rider's answer
            flight.error = exc
        except BaseException:  # the sender was killed: its riders were not checked
            flight.error = Unavailable(f"the check of pool {key[0]} was interrupted; "
                                       "try again")
            raise
        finally:
            flight.done.set()
            slot = self._slots[key]
            boarding = slot[1]
            if boarding is None:
                del self._slots[key]
            else:  # its riders arrived while this one was out: send theirs now
                slot[:] = [boarding, None]
                gevent.spawn(self._fly, key, boarding)


class ShapesCache:
    """The host manager's `host_shapes`, read again once `ttl` seconds old (`monotonic`
    is the clock), or when asked for `fresh` ones; see the module docstring."""

    def __init__(self, hostmgr: HostManagerPort, monotonic: Callable[[], float],
                 ttl: float = SHAPES_TTL) -> None:
        self.hostmgr = hostmgr
        self.ttl = ttl
        self._monotonic = monotonic
        self._shapes: list[HostShape] | None = None
        self._read_at = 0.0

    def host_shapes(self, fresh: bool = False) -> tuple[list[HostShape], bool]:
        """The shapes, and whether they were read from the host manager by this call."""
        now = self._monotonic()
        if fresh or self._shapes is None or now - self._read_at >= self.ttl:
            self._shapes, self._read_at = self.hostmgr.host_shapes(), now
            return self._shapes, True
        return self._shapes, False


def refuse_if_never_runs(resmgr: PoolValidator, hostmgr: HostManagerPort,
                         spec: JobSpec, shapes: ShapesCache | None = None) -> None:
    """Validate the job's pool; unless it asks to be queued anyway, raise InvalidArgument
    naming the resource and the largest host when no UP host or pool limit could ever
    hold its tasks.  With `shapes` the hosts are judged from that cache (a refusal on
    cached shapes is judged again on fresh ones)."""
    if job_asks_to_queue(spec):
        resmgr.validate_pool(spec.respool_id)
        return
    # The hosts are judged (on this hub: every host's shape, tens of ms at 10,000 hosts)
    # while the resource manager checks the pool; a bad pool is still the first answer.
    pool = gevent.spawn(_pool_refusal, resmgr, spec.respool_id, admission_need(spec))
    try:
        why = _on_hosts(spec, hostmgr, shapes)
    except Exception:
        _raise_pool(pool)
        raise
    _raise_pool(pool)
    if why is not None:
        raise InvalidArgument(f"the job can never run: {why.message}. {HINT}", field=why.field)


def _on_hosts(spec: JobSpec, hostmgr: HostManagerPort,
              shapes: ShapesCache | None) -> Infeasible | None:
    """Why no UP host could ever hold one of the job's tasks (None: every task fits one)."""
    if shapes is None:
        return job_never_fits(spec, hostmgr.host_shapes())
    known, fresh = shapes.host_shapes()
    why = job_never_fits(spec, known)
    if why is not None and not fresh:
        why = job_never_fits(spec, shapes.host_shapes(fresh=True)[0])
    return why


def _pool_refusal(resmgr: PoolValidator, pool_id: str, need: Resources) -> Exception | None:
    """`validate_pool`'s refusal, returned: raised in its own greenlet, gevent would print it
    as a crash; the caller raises it (`_raise_pool`)."""
    try:
        resmgr.validate_pool(pool_id, need)
    except Exception as exc:
        return exc
    return None


def _raise_pool(pool: gevent.Greenlet) -> None:
    """The pool check's refusal, if it refused (a limit it is over, with the hint)."""
    exc: Exception | None = pool.get()
    if exc is None:
        return
    if isinstance(exc, InvalidArgument) and (exc.field or "").startswith("resources."):
        raise InvalidArgument(f"{exc.message}. {HINT}", field=exc.field) from None
    raise exc
