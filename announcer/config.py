"""Settings of the announcer (the `announcer_*` options of the Aurora bridge and `peloton up --zk`)."""

from __future__ import annotations

from dataclasses import dataclass

from peloton.common.leader import ROOT
from peloton.core.errors import InvalidArgument
from peloton.core.model.announce import DEFAULT_ROOT


@dataclass(frozen=True, slots=True)
class AnnouncerConfig:
    """Where to announce and how; `ensemble` empty means no announcer."""

    #: ZooKeeper servers (`h1:2181,h2:2181`), Aurora's executor `--announcer-ensemble`.
    ensemble: str = ""
    #: Root of relative announce paths, Aurora's executor `--announcer-serverset-path`.
    root: str = DEFAULT_ROOT
    #: Announce each host's address (from QueryHosts) instead of its name (Aurora announces
    #: the agent's `--hostname`; names like `peloton up`'s local agents' do not resolve).
    use_ip: bool = False
    #: Seconds between full reads of the pods (the watch is re-opened then).
    resync_secs: float = 300.0
    #: Peloton's election root: announcers elect one of them to write members
    #: (`<election_root>/announcer/leader`).
    election_root: str = ROOT
    session_timeout: float = 10.0

    def __post_init__(self) -> None:
        if not self.root.startswith("/"):
            raise InvalidArgument(f"the announcer root must be an absolute path, got {self.root!r}",
                                  field="announcer_serverset_path")
        if self.resync_secs <= 0:
            raise InvalidArgument("resync_secs must be positive", field="resync_secs")

    @property
    def enabled(self) -> bool:
        """Whether an ensemble is configured."""
        return bool(self.ensemble.strip())
