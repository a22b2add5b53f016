"""How the agent enforces a task's memory limit on this machine.

In order of preference:
  1. cgroup v2, when the unified hierarchy is writable and the memory
     controller can be enabled for our subtree (`memory.max`);
  2. cgroup v1, when the memory controller's hierarchy is writable
     (`memory.limit_in_bytes`);
  3. RLIMIT_AS: caps address space, not resident memory, so a limit is
     enforced but its breach shows as failed allocations, not as a kill
     the agent can name.
Each task gets its own cgroup `<parent>/<run-id>`, made and removed by its
supervisor; the parent is made here, under the agent's own cgroup so the
tasks stay inside whatever limits the agent itself runs under.

A task asking for less than 32 MB gets a 32 MB limit, as Mesos' memory
isolators do (their MIN_MEMORY): job files written for Peloton on Mesos ask
for 0.1 MB and ran there, so taking them literally would kill every task
(`enforced_memory_mb`).  The task's resources are not changed: placement and
accounting still use what it asked for.

PELOTON_MEMORY_ISOLATION (read here only, by `requested_mode`) overrides the
choice: `auto` (the default) as above; `cgroup` requires cgroup v2 or v1 and
refuses to start the agent without one; `rlimit` uses RLIMIT_AS even where a
cgroup would do (to exercise that path, or where cgroups are shared).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from peloton.core.errors import FailedPrecondition, InvalidArgument

log = logging.getLogger(__name__)

CGROUP_ROOT = Path("/sys/fs/cgroup")
#: The smallest memory limit enforced (Mesos' MIN_MEMORY, 32 MB).
MIN_MEMORY_MB = 32.0
#: The environment variable choosing the mechanism, and the values it takes.
MODE_ENV = "PELOTON_MEMORY_ISOLATION"
MODES = ("auto", "cgroup", "rlimit")


def enforced_memory_mb(mem_mb: float) -> float:
    """The memory limit applied for a task asking for `mem_mb` (0: none), at least 32 MB."""
    if mem_mb <= 0:
        return 0.0
    return max(mem_mb, MIN_MEMORY_MB)


@dataclass(frozen=True, slots=True)
class MemoryIsolation:
    """The chosen mechanism; `parent` is the cgroup directory tasks get theirs under."""

    kind: str  # "cgroup v2" | "cgroup v1" | "rlimit"
    parent: Path | None = None

    def supervisor_args(self, run_id: str, limit_bytes: int) -> list[str]:
        """The supervisor options enforcing `limit_bytes` for one run (none if no limit)."""
        if limit_bytes <= 0:
            return []
        if self.parent is None:
            return ["-m", str(limit_bytes), "-R"]
        version = "2" if self.kind == "cgroup v2" else "1"
        return ["-m", str(limit_bytes), "-c", str(self.parent / run_id), "-V", version]

    def release(self) -> None:
        """Remove the agent's parent cgroup if no task's cgroup is left in it (else keep it)."""
        if self.parent is not None:
            try:
                self.parent.rmdir()
            except OSError:
                pass  # tasks still running under it; an agent restart reuses it

    def describe(self, mem_mb: float) -> str:
        """For task messages: which limit applies (`mem_mb` already enforced) and how."""
        if mem_mb <= 0:
            return "no memory limit"
        how = "RLIMIT_AS (address space)" if self.parent is None else self.kind
        return f"memory limit {mem_mb:g} MB via {how}"


def _own_cgroup(controller: str) -> str:
    """This process's cgroup path in a v1 hierarchy ("" for v2's unified line)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return "/"
    for line in lines:
        _, controllers, path = line.split(":", 2)
        names = controllers.split(",") if controllers else []
        if (not controller and not names) or (controller and controller in names):
            return path
    return "/"


def _writable_dir(path: Path) -> bool:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(path, os.W_OK)


def _try_v2(name: str) -> MemoryIsolation | None:
    mount = next((m for m in (CGROUP_ROOT, CGROUP_ROOT / "unified")
                  if (m / "cgroup.controllers").exists()), None)
    if mount is None:
        return None
    own = mount / _own_cgroup("").lstrip("/")
    if "memory" not in (own / "cgroup.controllers").read_text().split():
        return None
    parent = own / f"peloton-{name}"
    if not _writable_dir(parent):
        return None
    try:
        # Tasks' cgroups sit under `parent`; it needs the controller for them.
        (parent / "cgroup.subtree_control").write_text("+memory")
    except OSError as exc:
        log.info("cgroup v2 present but memory cannot be delegated (%s)", exc)
        return None
    return MemoryIsolation("cgroup v2", parent)


def _try_v1(name: str) -> MemoryIsolation | None:
    mount = CGROUP_ROOT / "memory"
    if not (mount / "memory.limit_in_bytes").exists():
        return None
    parent = mount / _own_cgroup("memory").lstrip("/") / f"peloton-{name}"
    if not _writable_dir(parent) or not (parent / "memory.limit_in_bytes").exists():
        return None
    return MemoryIsolation("cgroup v1", parent)


def requested_mode(environ: Mapping[str, str] = os.environ) -> str:
    """The mechanism PELOTON_MEMORY_ISOLATION asks for (auto when unset or empty)."""
    mode = environ.get(MODE_ENV, "").strip().lower() or "auto"
    if mode not in MODES:
        raise InvalidArgument(f"{MODE_ENV}={environ[MODE_ENV]!r}: expected one of "
                              f"{', '.join(MODES)}", field=MODE_ENV)
    return mode


def detect(agent_name: str, mode: str | None = None, work_dir: Path | None = None) -> MemoryIsolation:
    """The mechanism to use here (`mode`, default from the environment); logs which and why.

    The parent cgroup is named after the agent and, with `work_dir`, a digest of it: two
    agents of one name on one machine (every `peloton up` names its agent after the host)
    then never share a parent, so one stopping cannot remove the parent the other's tasks
    are being put under.

    Raises InvalidArgument for an unknown mode and FailedPrecondition when `cgroup`
    is required but no writable cgroup memory controller exists.
    """
    mode = requested_mode() if mode is None else mode
    if mode not in MODES:
        raise InvalidArgument(f"memory isolation {mode!r}: expected one of {', '.join(MODES)}",
                              field=MODE_ENV)
    if mode == "rlimit":
        log.info("memory limits enforced with RLIMIT_AS (%s=rlimit)", MODE_ENV)
        return MemoryIsolation("rlimit")
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", agent_name)
    if work_dir is not None:
        safe += "-" + hashlib.sha256(str(work_dir.resolve()).encode()).hexdigest()[:10]
    for probe in (_try_v2, _try_v1):
        try:
            found = probe(safe)
        except OSError as exc:
            log.info("%s: %s", probe.__name__, exc)
            found = None
        if found is not None:
            log.info("memory limits enforced with %s under %s", found.kind, found.parent)
            return found
    if mode == "cgroup":
        raise FailedPrecondition(f"{MODE_ENV}=cgroup but no writable cgroup memory controller "
                                 f"(v2 or v1) under {CGROUP_ROOT}", field=MODE_ENV)
    log.warning("no writable cgroup memory controller: memory limits enforced with RLIMIT_AS")
    return MemoryIsolation("rlimit")
