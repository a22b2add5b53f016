"""Knobs of the job manager (defaults follow Peloton's config/jobmgr, shortened where
Peloton's values only made sense for Mesos-scale latencies)."""

from __future__ import annotations

from dataclasses import dataclass

from peloton.core.errors import InvalidArgument


@dataclass(frozen=True, slots=True)
class JobManagerConfig:
    """Timing and batching of the job manager's loops."""

    #: Placed tasks taken from the resource manager per launch round.  Each round, like each
    #: batch of events, runs on the hub without yielding until its one write: bigger batches
    #: save little per task and delay every API call behind them (a 4,000-event batch took
    #: 0.1-0.4 s).
    launch_batch: int = 1000
    #: Host events taken per round of the status stream.
    event_batch: int = 1000
    #: How long a loop waits for work before looking again (seconds).
    poll_timeout: float = 0.2
    #: Job runtimes are recomputed at most this often after task changes (seconds).
    runtime_update_interval: float = 0.2
    #: A host's STARTING waits in the cache this long at most for the run's next change
    #: (RUNNING, its end, a kill) to be stored with it, one write for both; then it is
    #: stored alone (core/lifecycle/store_later.py).  Hosts report RUNNING soon after
    #: STARTING (the simulation at once, but a launch wave's STARTINGs reach the stream
    #: before its RUNNINGs, so they land in different batches; an agent once the process
    #: is up); 2 s covers that and ten poll rounds, and is how long another job manager
    #: reading the store may see such a run LAUNCHED.  0: every STARTING is stored at once.
    store_later_secs: float = 2.0
    #: A run LAUNCHED or STARTING for longer than this is killed and started again.
    launch_timeout: float = 180.0
    #: A run KILLING for longer than this is killed again with no grace.
    kill_timeout: float = 120.0
    #: Default SIGTERM -> SIGKILL grace when a task spec does not set one.
    kill_grace_secs: float = 5.0
    #: Goal-state worker greenlets.
    task_workers: int = 100
    job_workers: int = 20
    update_workers: int = 20
    #: Victims (preemption) and draining runs looked at per round.
    evict_batch: int = 100
    evict_interval: float = 1.0
    #: Bytes (estimated) of per-instance task configs the job cache keeps in memory; the rest
    #: are read back from storage when asked for (peloton/jobmgr/task_configs.py).
    task_config_cache_bytes: int = 64 * 1024 * 1024
    #: All-active job managers (docs/design/all-active-jobmgr.md): jobs split into this many
    #: partitions, each process driving those ZooKeeper assigns it.  Fixed for the life of a
    #: cluster's store (every member must agree; ZooKeeper keeps the count and a member
    #: configured otherwise refuses to join).  None (the default): 64 when the process has
    #: ZooKeeper (all active), 0 without.  0: one leader drives every job, with standbys
    #: (Aurora's and the earlier default; a cluster whose members have joined refuses it).
    partitions: int | None = None
    #: A member's ZooKeeper session timeout (seconds): a member killed with -9 loses its
    #: partitions about this long after its last ping, so it bounds the pause of those
    #: partitions' writes (issue 24 asks <= 5 s).  ZooKeeper raises it to at least twice its
    #: tickTime (4 s at ZooKeeper's default 2 s tick; `peloton up` starts one with 0.5 s).
    #: Leaders (job managers with partitions 0, and the other daemons) use
    #: election.session_timeout.
    member_session_timeout: float = 3.0
    #: This process's member id among the job managers (unique, stable across restarts so
    #: a restarted member gets its partitions back); empty: `<hostname>:<grpc port>`.
    member_id: str = ""

    def __post_init__(self) -> None:
        if self.partitions is not None and self.partitions < 0:
            raise InvalidArgument("partitions must be >= 0 (0: a single leader)",
                                  field="partitions")
        if not self.member_session_timeout > 0:
            raise InvalidArgument("member_session_timeout must be positive",
                                  field="member_session_timeout")
        if self.store_later_secs < 0:
            raise InvalidArgument("store_later_secs must be >= 0 (0: store at once)",
                                  field="store_later_secs")
        if "/" in self.member_id:
            raise InvalidArgument("member_id may not contain '/'", field="member_id")
