"""Settings of the Mesos backend.

Defaults follow Peloton's host manager (config/hostmgr/base.yaml): framework
"Peloton", role and principal "peloton", user root, a failover timeout of
about 100 weeks, GPUs on, revocable resources off, offers held for 10 days.
The timings below the offers are this implementation's.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class MesosConfig:
    """How the Mesos backend registers and behaves (defaults: Peloton's hostmgr config)."""

    #: "host:port", "http://host:port" or "zk://host:port,.../mesos". Empty in the host
    #: manager's `mesos:` config section: there the master comes from `backend: mesos:MASTER`.
    master: str = ""
    framework_name: str = "Peloton"
    role: str = "peloton"
    principal: str = "peloton"
    #: With `principal`, HTTP basic authentication to the master.
    secret: str = ""
    user: str = "root"
    failover_timeout_secs: float = 60_000_000.0
    gpu_supported: bool = True
    revocable_resources: bool = False
    #: Offers held this long are declined (and refused for `decline_refuse_secs`).
    offer_hold_secs: float = 864_000.0
    decline_refuse_secs: float = 5.0
    #: A run no offer had room for within this time is reported FAILED.
    launch_wait_secs: float = 30.0
    agent_refresh_secs: float = 10.0
    #: Re-delivery period of updates Mesos does not re-send (reconciliation answers, ours).
    resend_secs: float = 10.0
    reconcile_batch: int = 1000
    call_timeout_secs: float = 10.0
    tick_secs: float = 0.2
    max_backoff_secs: float = 30.0
