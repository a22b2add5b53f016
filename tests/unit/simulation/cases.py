"""The two-pool case, computed by hand (tests/unit/simulation/data/two-pools*).

Cluster: 2 hosts of 4 cpu (8 cpu).  Pools /a and /b: reservation 4 cpu, limit 8,
share 1 each.  Tasks ask 1 cpu and 1024 MB.  Trace:

    a1  t=0    /a  4 tasks x 100 s        b1  t=0   /b  4 tasks x 100 s
    a2  t=10   /a  4 tasks x 50 s         c1  t=20  /b  1 task of 16 cpu (fits no host)
    b2  t=120  /b  2 tasks x 30 s

Baseline: a1 and b1 fill the cluster at t=0; /a is at its entitlement (4), so a2
waits until a1 ends at t=100 (wait 90 s each) and runs to t=150; b2 starts at
once at t=120; c1 never runs (16 cpu: above /b's limit of 8, and no host has 16).
The run stops at the horizon, t=180.  Entitlement (peloton/core/respool/
entitlement.py): each pool is first given min(request, reservation), where request =
min(limit, allocation + demand); what is left goes by share to unmet requests, then
to limits.  Until t=150 both pools ask for 8 (/b for c1's 16, capped at 8) and get
their reservation, 4 each; once a2 has ended /a asks for nothing, so /b's unmet 4 is
filled and the sample at t=180 shows /a 0 and /b 8 (the last sample holds for no
time, so no mean moves).

What-if "more-hosts" (2 more hosts of 4 cpu at t=0): 16 cpu, each pool entitled
to 8 (reservation 4 + half of the 8 unreserved, within its limit 8), so a2
starts on arrival at t=10 (wait 0).  c1 (16 cpu) is still above /b's entitlement
and fits no host either.

The PENDING_AT_END reasons are the resource manager's words (peloton/resmgr/reasons.py).
tests/unit/simulation/test_engine.py runs both scenarios through the real engine and
checks that it makes exactly these calls.
"""

from __future__ import annotations

from peloton.simulation.result import TaskEventKind as K
from tests.unit.simulation.scripted import Call, Cluster, Finish, Pool, Tasks

ALL4 = range(4)
# What the resource manager says (peloton/resmgr/reasons.py): c1's 16 cpu exceed what /b may use.
_C1_REASON = ("waiting for admission in pool /b (1st of 1 queued): needs 16 cpu, more than the "
              "pool may use now (8 cpu; its limit is 8 cpu, the cluster has {} cpu); it waits "
              "until the pool may use more")
C1_REASON_BASE = _C1_REASON.format(8)
C1_REASON_MORE = _C1_REASON.format(16)

BASELINE: list[Call] = [
    Tasks(0, K.SUBMITTED, "a1", ALL4), Tasks(0, K.SUBMITTED, "b1", ALL4),
    Tasks(0, K.STARTED, "a1", ALL4), Tasks(0, K.STARTED, "b1", ALL4),
    Pool(0, "/a", 0, 4, 4, 0), Pool(0, "/b", 0, 4, 4, 0), Cluster(0, 8, 8, 2),
    Tasks(10, K.SUBMITTED, "a2", ALL4),
    Tasks(20, K.SUBMITTED, "c1", [0]),
    Pool(60, "/a", 4, 4, 4, 4), Pool(60, "/b", 16, 4, 4, 1), Cluster(60, 8, 8, 2),
    Tasks(100, K.FINISHED, "a1", ALL4), Tasks(100, K.FINISHED, "b1", ALL4),
    Tasks(100, K.STARTED, "a2", ALL4),
    Tasks(120, K.SUBMITTED, "b2", [0, 1]), Tasks(120, K.STARTED, "b2", [0, 1]),
    Pool(120, "/a", 0, 4, 4, 0), Pool(120, "/b", 16, 4, 2, 1), Cluster(120, 8, 6, 2),
    Tasks(150, K.FINISHED, "a2", ALL4), Tasks(150, K.FINISHED, "b2", [0, 1]),
    Pool(180, "/a", 0, 0, 0, 0), Pool(180, "/b", 16, 8, 0, 1), Cluster(180, 8, 0, 2),
    Tasks(180, K.PENDING_AT_END, "c1", [0], C1_REASON_BASE),
    Finish(180),
]

MORE_HOSTS: list[Call] = [
    Tasks(0, K.SUBMITTED, "a1", ALL4), Tasks(0, K.SUBMITTED, "b1", ALL4),
    Tasks(0, K.STARTED, "a1", ALL4), Tasks(0, K.STARTED, "b1", ALL4),
    Pool(0, "/a", 0, 8, 4, 0), Pool(0, "/b", 0, 8, 4, 0), Cluster(0, 16, 8, 4),
    Tasks(10, K.SUBMITTED, "a2", ALL4), Tasks(10, K.STARTED, "a2", ALL4),
    Tasks(20, K.SUBMITTED, "c1", [0]),
    Tasks(60, K.FINISHED, "a2", ALL4),
    Pool(60, "/a", 0, 8, 4, 0), Pool(60, "/b", 16, 8, 4, 1), Cluster(60, 16, 8, 4),
    Tasks(100, K.FINISHED, "a1", ALL4), Tasks(100, K.FINISHED, "b1", ALL4),
    Tasks(120, K.SUBMITTED, "b2", [0, 1]), Tasks(120, K.STARTED, "b2", [0, 1]),
    Pool(120, "/a", 0, 8, 0, 0), Pool(120, "/b", 16, 8, 2, 1), Cluster(120, 16, 2, 4),
    Tasks(150, K.FINISHED, "b2", [0, 1]),
    Pool(180, "/a", 0, 8, 0, 0), Pool(180, "/b", 16, 8, 0, 1), Cluster(180, 16, 0, 4),
    Tasks(180, K.PENDING_AT_END, "c1", [0], C1_REASON_MORE),
    Finish(180),
]

SCRIPTS = {"baseline": BASELINE, "more-hosts": MORE_HOSTS}
