"""Immutable remote volumes and fetched files: a task's `command.uris`, fetched before its
run starts (peloton/core/remote_volume.py says how a URI is read).

Layout (`root` is `<work-dir>/remote-volumes`, or `<sandbox root>.remote` when sandboxes
live outside the work dir, so a task's user can always walk to it)::

    <root>/                  agent-owned, 0711: tasks pass through, cannot list
    <root>/blobs/            agent-owned, 0711
    <root>/blobs/<sha256>    a fetched file, 0444 (0555 executable: `<sha256>.x`)
    <root>/blobs/<sha256>.d/ an unpacked archive: directories 0555, files 0444 or 0555
    <root>/index/<key>       0600: which blob a URL (with its checksum and flags) fetched
    <root>/users/<run id>    0600: the entries a live run holds (one name a line)
    <root>/tmp/              0700: downloads in progress, renamed into blobs/ when whole;
                             evicted entries, renamed here before they are removed

* **Cached** (`cache: true`, an immutable remote volume): fetched once per host.  The
  entry is named by the sha256 of what was fetched (content-addressed), so two URLs of the
  same bytes share it, and a URL with a checksum whose blob is here is not fetched at all.
  Runs launched while a URL is being fetched wait for that one download.  The run gets a
  symlink `<sandbox>/<path>` -> the entry, made by the agent before its supervisor exists
  (root's, in the sticky sandbox: the task cannot replace it).  A link, not a copy: nothing
  is copied per run (a data set of gigabytes is shared by every run on the host), and the
  entry's files are the agent's and read-only, so a task (another uid) cannot change what
  later runs see.  An agent that is not root runs tasks as itself: then only the mode bits
  stand between a task and the cache.
* **Not cached** (Mesos' default): fetched again for each run and moved into its sandbox,
  owned by the run's user, writable, as the Mesos fetcher did.
* Every fetch is bounded: `max_mb` (a larger body is refused, named, before or while it is
  read) and `timeout_secs` per fetch.  A sha256 that does not match fails the run with both
  digests, and nothing is kept.  A `file:` URL is read only if every user could read it
  (the agent may be root; the task must not read through it what it could not read itself).
* **Budget and eviction** (like the Mesos fetcher cache's `--fetcher_cache_size` and its
  LRU): the cache holds at most `budget_mb` (the agent's `--fetch-cache-mb`, 2 GiB) of
  entries, an entry's size being its file's length or the sum of its unpacked files.  An
  entry is held by every run it was fetched or found for, from `prepare` until the run
  ends (`release`, from the executor's terminal update) or will not start (`discard`);
  the holders are also written to `users/<run id>`, so a restarted agent knows them.  A
  new entry that would not fit evicts unheld entries, least recently used first (the rule:
  remote_lru.py); when every entry is held the fetch proceeds anyway, the cache stays over
  its budget (logged) and shrinks as runs release entries.  Last use is the entry's mtime,
  set whenever a run takes or releases it.  An evicted entry is renamed out of `blobs/`
  under the lock (no run can find it half removed) with its index keys, then removed; the
  next run that names its URL fetches it again.  The sandbox of a finished run keeps its
  link, which may then dangle.  Restarted, the agent rebuilds entries, sizes and last uses
  from `blobs/` and holders from `users/`, then (once runs are adopted) releases the
  holders that are no longer live (`keep_users`).
* The budget is the cache's own bound; the disk the agent offers is not reduced by it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tarfile
import threading
import time
import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path

from peloton.agent.cache_files import (
    chown_tree,
    make_parents,
    read_only,
    remove_all,
    remove_path,
    tree_size,
)
from peloton.agent.model import RunSpec
from peloton.agent.remote_lru import CacheEntry, plan_evictions
from peloton.agent.url_openers import MB, OPENERS, Opener, download
from peloton.core.errors import (
    FailedPrecondition,
    PelotonError,
)
from peloton.core.remote_volume import FetchKind, RemoteVolume, mismatch

log = logging.getLogger(__name__)

#: The largest file fetched for a run, unless the agent says otherwise.
DEFAULT_MAX_MB = 1024.0
#: How long one fetch may take, unless the agent says otherwise.
DEFAULT_TIMEOUT_SECS = 120.0
#: How much the cache of immutable remote volumes may hold, unless the agent says otherwise
#: (the Mesos fetcher cache's default size).
DEFAULT_BUDGET_MB = 2048.0

def remote_root(work_dir: Path, sandbox_root: Path) -> Path:
    """Where an agent keeps fetched files: beside its sandboxes, so tasks can reach both."""
    if sandbox_root == work_dir / "sandboxes":
        return work_dir / "remote-volumes"
    return sandbox_root.with_name(sandbox_root.name + ".remote")


@dataclass(frozen=True, slots=True)
class Fetched:
    """One URI made ready for a run: a cache entry to link, or a private copy to move in."""

    vol: RemoteVolume
    path: Path
    shared: bool


@dataclass(slots=True)
class _Flight:
    """One download in progress; later askers wait on `done`."""

    done: threading.Event
    waiters: int = 0  # askers sharing it (besides the one downloading)
    #: The runs of those askers: the downloader makes them holders of the new entry.
    runs: set[str] = field(default_factory=set)
    entry: Path | None = None
    error: PelotonError | None = None


@dataclass(slots=True)
class _Entry:
    """What the cache knows of one entry of blobs/."""

    size: int
    last_used: float
    users: set[str] = field(default_factory=set)  # run ids holding it
    keys: set[str] = field(default_factory=set)  # index/ files naming it


class RemoteCache:
    """The fetched files of one agent."""

    def __init__(self, root: Path, *, max_mb: float = DEFAULT_MAX_MB,
                 timeout_secs: float = DEFAULT_TIMEOUT_SECS,
                 budget_mb: float = DEFAULT_BUDGET_MB,
                 openers: dict[FetchKind, Opener] | None = None,
                 monotonic: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time) -> None:
        self.root = root
        self.max_mb = max_mb
        self.timeout_secs = timeout_secs
        #: Bytes the entries may take (exceeded only while held entries leave no choice).
        self.budget = int(budget_mb * MB)
        self._openers = {**OPENERS, **(openers or {})}
        self._monotonic = monotonic
        self._wall = wall
        self._lock = threading.Lock()
        self._flights: dict[str, _Flight] = {}
        self._entries: dict[str, _Entry] = {}  # by name in blobs/
        self._held: dict[str, set[str]] = {}  # run id -> names of the entries it holds
        #: Downloads made (cache hits and shared waits are not): what a test can count.
        self.downloads = 0
        #: Entries evicted since start: what a test can count.
        self.evictions = 0
        self.blobs, self.index, self.tmp = root / "blobs", root / "index", root / "tmp"
        self.users = root / "users"
        self._made = False
        if self.tmp.is_dir():
            for left in self.tmp.iterdir():  # downloads a crash interrupted
                remove_path(left)
        if self.blobs.is_dir():
            self._recover()

    def _make(self) -> None:
        """The cache's directories, made with the first fetch (most agents never fetch)."""
        if self._made:
            return
        for path, mode in ((self.root, 0o711), (self.blobs, 0o711), (self.index, 0o700),
                           (self.users, 0o700), (self.tmp, 0o700)):
            path.mkdir(parents=True, exist_ok=True)
            os.chmod(path, mode)
        self._made = True

    # -- readiness ------------------------------------------------------------------------
    def ready(self, spec: RunSpec) -> bool:
        """Whether a run needs no fetch (every URI is cached here already)."""
        return all(v.cache and self._lookup(v) is not None for v in spec.remote)

    def prepare(self, spec: RunSpec) -> list[Fetched]:
        """Fetch what the run needs (blocks for the downloads); raises a PelotonError that
        names the URL when one cannot be had.  Private copies made before a failure are
        removed."""
        if spec.remote_error:
            raise FailedPrecondition(spec.remote_error, field="command.uris")
        if spec.remote:
            with self._lock:
                self._make()
        out: list[Fetched] = []
        try:
            for vol in spec.remote:
                if vol.cache:
                    out.append(Fetched(vol, self._cached(vol, spec.run_id), True))
                else:
                    out.append(Fetched(vol, self._private(vol), False))
            self._record(spec.run_id)
        except BaseException:
            self.discard(spec.run_id, out)
            raise
        return out

    def attach(self, fetched: list[Fetched], spec: RunSpec, sandbox: Path) -> None:
        """Put the fetched files into the run's sandbox (made here, before its supervisor):
        links to cache entries, private copies moved in and given to the run's user."""
        if not fetched:
            return
        sandbox.mkdir(mode=0o700, exist_ok=True)
        for item in fetched:
            dest = sandbox / item.vol.path
            make_parents(sandbox, dest)
            if dest.is_symlink():
                dest.unlink()
            if os.path.lexists(dest):
                raise FailedPrecondition(f"remote volume {item.vol.url}: {item.vol.path} is "
                                         "already taken in the sandbox", field="command.uris")
            if item.shared:
                dest.symlink_to(item.path, target_is_directory=item.path.is_dir())
                continue
            shutil.move(item.path, dest)
            if os.geteuid() == 0 and spec.uid >= 0:
                chown_tree(dest, spec.uid, spec.gid)

    def discard(self, run_id: str, fetched: list[Fetched]) -> None:
        """A run that will not start: remove its private copies, release its entries."""
        for item in fetched:
            if not item.shared:
                remove_path(item.path)
        self.release(run_id)

    # -- holders and the budget -----------------------------------------------------------
    def release(self, run_id: str) -> None:
        """The run ended (or will not start): it holds no entry any more, and entries kept
        over the budget for it are evicted now.  Idempotent; the executor calls it with
        every terminal update."""
        with self._lock:
            names = self._held.pop(run_id, None)
            if names is None:
                return
            now = self._wall()
            for name in names:
                entry = self._entries.get(name)
                if entry is not None:
                    entry.users.discard(run_id)
                    self._touch(name, entry, now)
            remove_path(self.users / run_id)
            victims = self._evict(0)
        remove_all(victims)

    def keep_users(self, live: Collection[str]) -> None:
        """Release every holder but the `live` runs (after a restart, once the runs on disk
        are adopted: the others ended, or were forgotten, while no agent ran)."""
        with self._lock:
            gone = [run_id for run_id in self._held if run_id not in live]
        for run_id in gone:
            self.release(run_id)

    def entries(self) -> list[CacheEntry]:
        """The cache's entries as the eviction rule sees them (a copy)."""
        with self._lock:
            return self._snapshot()

    @property
    def used(self) -> int:
        """Bytes the entries take."""
        with self._lock:
            return sum(e.size for e in self._entries.values())

    def _snapshot(self) -> list[CacheEntry]:
        return [CacheEntry(name, e.size, e.last_used, len(e.users))
                for name, e in self._entries.items()]

    def _hold(self, path: Path, run_ids: Collection[str]) -> None:
        """Make runs holders of an entry (with the lock held)."""
        name = path.name
        entry = self._entries.get(name)
        if entry is None:  # on disk, unknown: put there by hand or by an older agent
            entry = self._entries[name] = _Entry(tree_size(path), self._wall())
        for run_id in run_ids:
            entry.users.add(run_id)
            self._held.setdefault(run_id, set()).add(name)
        self._touch(name, entry, self._wall())

    def _touch(self, name: str, entry: _Entry, now: float) -> None:
        """Note a use, in memory and as the entry's mtime (what a restarted agent reads)."""
        entry.last_used = now
        try:
            os.utime(self.blobs / name, (now, now), follow_symlinks=False)
        except OSError as exc:
            log.warning("remote volume cache: cannot note the use of %s: %s", name, exc)

    def _record(self, run_id: str) -> None:
        """Write down which entries a run holds, for an agent restarted while it lives."""
        if not run_id or "/" in run_id or run_id.startswith("."):
            return  # not a file name (run ids are checked before; a safety net)
        with self._lock:
            names = self._held.get(run_id)
            if not names:
                return
            fd = os.open(self.users / run_id, os.O_WRONLY | os.O_CREAT | os.O_TRUNC
                         | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write("".join(f"{name}\n" for name in sorted(names)))

    def _evict(self, incoming: int) -> list[Path]:
        """Apply the eviction rule for `incoming` new bytes (with the lock held): evicted
        entries leave blobs/ and the index now; the caller removes what is returned once
        it has let go of the lock."""
        plan = plan_evictions(self._snapshot(), self.budget, incoming)
        victims = []
        for name in plan.evict:
            entry = self._entries.pop(name)
            for key in entry.keys:
                try:
                    if (self.index / key).read_text().strip() == name:
                        (self.index / key).unlink()
                except FileNotFoundError:
                    pass
            path, moved = self.blobs / name, self.tmp / f"evicted.{uuid.uuid4().hex}"
            try:
                if path.is_dir() and not path.is_symlink():
                    os.chmod(path, 0o700)  # a directory moves only while its owner may write it
                os.rename(path, moved)
            except FileNotFoundError:
                continue
            victims.append(moved)
            self.evictions += 1
            log.info("remote volume cache: evicted %s (%d bytes, last used %s)", name,
                     entry.size, time.strftime("%Y-%m-%d %H:%M:%S",
                                               time.localtime(entry.last_used)))
        if plan.over_by and incoming:
            log.warning("remote volume cache %s: %d bytes over its budget of %d bytes, every "
                        "other entry being held by a live run; it shrinks as runs end",
                        self.root, plan.over_by, self.budget)
        return victims

    def _recover(self) -> None:
        """Entries, sizes and last uses from blobs/ (an entry's mtime is its last use),
        their index keys, and their holders from users/ (at start, before any fetch)."""
        for item in os.scandir(self.blobs):
            path = Path(item.path)
            self._entries[item.name] = _Entry(tree_size(path), os.lstat(path).st_mtime)
        if self.index.is_dir():
            for item in os.scandir(self.index):
                key = Path(item.path)
                try:
                    name = key.read_text().strip()
                except (OSError, UnicodeDecodeError):
                    name = ""  # not one of ours: dropped with the stale keys
                entry = self._entries.get(name)
                if entry is None:
                    remove_path(key)  # names an entry that is gone
                else:
                    entry.keys.add(item.name)
        if self.users.is_dir():
            for item in os.scandir(self.users):
                try:
                    text = Path(item.path).read_text()
                except (OSError, UnicodeDecodeError):
                    remove_path(Path(item.path))
                    continue
                names = {n for n in text.split() if n in self._entries}
                for name in names:
                    self._entries[name].users.add(item.name)
                self._held[item.name] = names
        remove_all(self._evict(0))  # the budget may be smaller than it was

    # -- the cache ------------------------------------------------------------------------
    @staticmethod
    def _name(vol: RemoteVolume, digest: str) -> str:
        if vol.archive is not None:
            return f"{digest}.d"
        return f"{digest}.x" if vol.executable else digest

    def _key(self, vol: RemoteVolume) -> Path:
        return self.index / hashlib.sha256(vol.cache_key.encode()).hexdigest()

    def _lookup(self, vol: RemoteVolume) -> Path | None:
        """The cache entry of a URL, if it is here (by checksum, else by the URL's index)."""
        if vol.sha256:
            entry = self.blobs / self._name(vol, vol.sha256)
            return entry if os.path.lexists(entry) else None
        try:
            name = self._key(vol).read_text().strip()
        except FileNotFoundError:
            return None
        entry = self.blobs / name
        return entry if name and "/" not in name and os.path.lexists(entry) else None

    def _cached(self, vol: RemoteVolume, run_id: str) -> Path:
        """The cache entry of `vol`, fetched now unless it is here or being fetched; held by
        `run_id` when this returns."""
        with self._lock:
            entry = self._lookup(vol)
            if entry is not None:
                self._hold(entry, (run_id,))
                return entry
            flight = self._flights.get(vol.cache_key)
            mine = flight is None
            if flight is None:
                flight = self._flights[vol.cache_key] = _Flight(threading.Event())
            else:
                flight.waiters += 1
                flight.runs.add(run_id)
        if not mine:
            flight.done.wait()
            if flight.error is not None:
                raise flight.error
            assert flight.entry is not None
            return flight.entry  # the downloader made this run a holder
        try:
            flight.entry = self._store(vol, run_id, flight)
            return flight.entry
        except PelotonError as exc:
            flight.error = exc
            raise
        except OSError as exc:
            flight.error = FailedPrecondition(f"remote volume {vol.url}: {exc}")
            raise flight.error from exc
        finally:
            with self._lock:
                del self._flights[vol.cache_key]
            flight.done.set()

    def _store(self, vol: RemoteVolume, run_id: str, flight: _Flight) -> Path:
        """Download `vol` into the cache, evicting what the budget asks, and make its run
        (and the runs waiting on `flight`) its holders."""
        staged, digest = self._download(vol)
        entry = self.blobs / self._name(vol, digest)
        key = self._key(vol)
        tmp = self.tmp / f"{key.name}.{uuid.uuid4().hex}"
        ready = staged
        victims: list[Path] = []
        try:
            if vol.archive is not None and not os.path.lexists(entry):
                ready = self._unpack(vol, staged)
                read_only(ready)
            tmp.write_text(entry.name)
            with self._lock:  # eviction, entry and index change together: lookups see all
                if not os.path.lexists(entry):
                    size = tree_size(ready)
                    victims = self._evict(size)
                    if vol.archive is not None:
                        os.rename(ready, entry)  # a directory moves while its owner may write it
                        os.chmod(entry, 0o555)
                    else:
                        os.chmod(staged, 0o555 if vol.executable else 0o444)
                        os.rename(staged, entry)
                    self._entries[entry.name] = _Entry(size, self._wall())
                os.rename(tmp, key)
                self._hold(entry, {run_id, *flight.runs})
                self._entries[entry.name].keys.add(key.name)
        finally:
            for left in (staged, ready, tmp):
                remove_path(left)
        remove_all(victims)
        log.info("remote volume %s cached as %s", vol.url, entry.name)
        return entry

    def _private(self, vol: RemoteVolume) -> Path:
        staged, _ = self._download(vol)
        if vol.archive is None:
            os.chmod(staged, 0o755 if vol.executable else 0o644)
            return staged
        try:
            return self._unpack(vol, staged)
        finally:
            remove_path(staged)

    def _download(self, vol: RemoteVolume) -> tuple[Path, str]:
        """Fetch `vol` into tmp/; (the file, its sha256).  Bounded in size and time; the
        checksum is checked.  Nothing is left behind on failure."""
        staged, digest, size = download(vol, self._openers[vol.kind], self.tmp,
                                        max_mb=self.max_mb, timeout_secs=self.timeout_secs,
                                        monotonic=self._monotonic)
        self.downloads += 1
        problem = mismatch(vol, digest)
        if problem is not None:
            remove_path(staged)
            raise FailedPrecondition(problem, field="command.uris")
        log.info("fetched %s (%d bytes)", vol.url, size)
        return staged, digest

    def _unpack(self, vol: RemoteVolume, archive: Path) -> Path:
        """Unpack a tar archive into a new directory of tmp/ (the `data` filter: no absolute
        paths, no links or files outside it, no devices, no set-id bits)."""
        out = self.tmp / f"{uuid.uuid4().hex}.d"
        out.mkdir(mode=0o755)
        try:
            with tarfile.open(archive, "r:*") as tar:
                tar.extractall(out, filter="data")
        except (tarfile.TarError, OSError) as exc:
            remove_path(out)
            raise FailedPrecondition(f"remote volume {vol.url}: not an archive that can be "
                                     f"unpacked: {exc}", field="command.uris") from None
        return out
