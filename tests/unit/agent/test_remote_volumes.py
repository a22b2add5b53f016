"""Fetched files and immutable remote volumes on the agent (peloton/agent/remote_volumes.py,
and the executor's background fetch): fetched once into a read-only, content-addressed cache,
shared by concurrent runs, checked against their sha256, bounded in size, linked (cached) or
moved (not cached) into the sandbox."""

from __future__ import annotations

import hashlib
import http.server
import io
import os
import shutil
import stat
import tarfile
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import pytest

from peloton.agent.executor import Executor
from peloton.agent.identity import IdentityPolicy
from peloton.agent.isolation import MemoryIsolation
from peloton.agent.model import RunSpec
from peloton.agent.remote_volumes import RemoteCache, remote_root
from peloton.agent.reporter import StatusReporter
from peloton.agent.sandbox import Sandboxes
from peloton.agent.url_openers import MB
from peloton.agent.wire import run_spec_from_pb
from peloton.core.errors import FailedPrecondition, PermissionDenied, ResourceExhausted
from peloton.core.model.sched import LaunchSpec
from peloton.core.model.task import CommandSpec, TaskSpec, UriSpec
from peloton.core.remote_volume import FetchKind, remote_volumes
from peloton.core.states import TaskState
from peloton.hostmgr.backends.local_wire import launch_to_pb
from tests.harness.procs import wait_for

JOB = "6a8f1c4e-0000-4000-8000-000000000000"


def run(n: int, *uris: UriSpec, uid: int = -1) -> RunSpec:
    return RunSpec(run_id=f"{JOB}-0-{n}", command=CommandSpec("true"), uid=uid, gid=uid,
                   remote=remote_volumes(uris))


@pytest.fixture
def served() -> Iterator[Path]:
    """A directory every user can walk to and read (pytest's tmp_path is closed to others, and
    a root agent reads a file: URL only if any user could), holding v1 of a config file."""
    top = Path(tempfile.mkdtemp(prefix="pelotonpy-served-", dir="/tmp"))
    try:
        os.chmod(top, 0o755)
        (top / "v1.txt").write_text("version 1\n")
        os.chmod(top / "v1.txt", 0o644)
        yield top
    finally:
        shutil.rmtree(top)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_a_cached_uri_is_fetched_once_and_linked_read_only(tmp_path: Path, served: Path) -> None:
    cache = RemoteCache(tmp_path / "cache")
    assert not cache.root.exists()  # made with the first fetch: most agents never fetch
    uri = UriSpec(f"file://{served}/v1.txt", cache=True, output_file="conf/app.txt")
    first = run(1, uri)
    assert not cache.ready(first)
    old = os.umask(0o077)  # the agent's umask must not close the way to the file
    try:
        cache.attach(cache.prepare(first), first, tmp_path / "sb1")
    finally:
        os.umask(old)
    link = tmp_path / "sb1" / "conf" / "app.txt"
    assert link.is_symlink() and link.read_text() == "version 1\n"
    assert stat.S_IMODE(os.stat(link.parent).st_mode) == 0o755
    entry = link.resolve()
    assert entry.parent == cache.blobs and entry.name == sha("version 1\n")
    st = os.stat(entry)
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (os.geteuid(), 0o444)
    assert stat.S_IMODE(os.stat(cache.root).st_mode) == 0o711  # tasks pass, cannot list

    # The next run, and an agent restarted on the same cache, find it without fetching.
    again = RemoteCache(tmp_path / "cache")
    assert again.ready(run(2, uri))
    again.attach(again.prepare(run(2, uri)), run(2, uri), tmp_path / "sb2")
    assert (cache.downloads, again.downloads) == (1, 0)
    assert (tmp_path / "sb2" / "conf" / "app.txt").resolve() == entry


def test_a_checksum_finds_the_content_whatever_url_named_it(tmp_path: Path) -> None:
    blobs = {"http://a.invalid/one": b"same bytes", "http://b.invalid/two": b"same bytes"}
    cache = RemoteCache(tmp_path / "cache", openers={FetchKind.HTTP: _serve(blobs)})
    digest = hashlib.sha256(b"same bytes").hexdigest()
    one = run(1, UriSpec(f"http://a.invalid/one#sha256={digest}", cache=True))
    cache.prepare(one)
    two = run(2, UriSpec(f"http://b.invalid/two#sha256={digest}", cache=True))
    assert cache.ready(two) and cache.prepare(two)[0].path.name == digest
    assert cache.downloads == 1


def test_concurrent_runs_of_one_url_share_one_download(tmp_path: Path) -> None:
    release, calls = threading.Event(), []

    def slow(url: str, timeout: float) -> tuple[BinaryIO, int | None]:
        calls.append(url)
        assert release.wait(10)
        return io.BytesIO(b"data set v1"), None

    cache = RemoteCache(tmp_path / "cache", openers={FetchKind.HTTP: slow})
    uri = UriSpec("http://h.invalid/set.bin", cache=True)
    got: list[Path] = []
    threads = [threading.Thread(target=lambda n=n: got.append(cache.prepare(run(n, uri))[0].path))
               for n in range(4)]
    for t in threads:
        t.start()
    # Every run has asked before the one download ends: three wait for it.
    wait_for(lambda: [f.waiters for f in cache._flights.values()] == [3], 5, "3 waiting runs")
    release.set()
    for t in threads:
        t.join(10)
    assert calls == ["http://h.invalid/set.bin"] and cache.downloads == 1
    assert len(got) == 4 and len(set(got)) == 1


def test_a_checksum_mismatch_fails_with_both_digests_and_keeps_nothing(tmp_path: Path) -> None:
    cache = RemoteCache(tmp_path / "cache",
                        openers={FetchKind.HTTP: _serve({"http://h.invalid/x": b"tampered"})})
    spec = run(1, UriSpec(f"http://h.invalid/x#sha256={sha('original')}", cache=True))
    with pytest.raises(FailedPrecondition, match=f"sha256 mismatch: expected {sha('original')}, "
                                                 f"fetched {hashlib.sha256(b'tampered').hexdigest()}"):
        cache.prepare(spec)
    assert list(cache.blobs.iterdir()) == [] and list(cache.tmp.iterdir()) == []
    assert list(cache.index.iterdir()) == []


def test_bodies_over_the_limit_are_refused_by_length_or_while_read(tmp_path: Path) -> None:
    big = b"x" * (2 * 1024 * 1024)

    def lying(url: str, timeout: float) -> tuple[BinaryIO, int | None]:
        return io.BytesIO(big), None if url.endswith("unsized") else len(big)

    cache = RemoteCache(tmp_path / "cache", max_mb=1, openers={FetchKind.HTTP: lying})
    with pytest.raises(ResourceExhausted, match=r"larger \(2.0 MB\) than this agent's limit of 1 MB"):
        cache.prepare(run(1, UriSpec("http://h.invalid/sized", cache=True)))
    with pytest.raises(ResourceExhausted, match="larger than this agent's limit of 1 MB"):
        cache.prepare(run(2, UriSpec("http://h.invalid/unsized", cache=True)))
    assert list(cache.tmp.iterdir()) == []


def test_an_archive_is_unpacked_into_a_read_only_directory(tmp_path: Path) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        data = b"#!/bin/sh\necho hi\n"
        info = tarfile.TarInfo("bin/run.sh")
        info.size, info.mode = len(data), 0o777
        tar.addfile(info, io.BytesIO(data))
    cache = RemoteCache(tmp_path / "cache",
                        openers={FetchKind.HTTP: _serve({"http://h.invalid/app.tgz": buf.getvalue()})})
    spec = run(1, UriSpec("http://h.invalid/app.tgz", cache=True))
    cache.attach(cache.prepare(spec), spec, tmp_path / "sb")
    script = tmp_path / "sb" / "app" / "bin" / "run.sh"
    assert script.read_bytes() == data
    assert stat.S_IMODE(os.stat(script).st_mode) == 0o555
    assert stat.S_IMODE(os.stat(script.parent).st_mode) == 0o555
    assert stat.S_IMODE(os.stat((tmp_path / "sb" / "app").resolve()).st_mode) == 0o555


def test_an_uncached_uri_is_fetched_for_every_run_and_belongs_to_it(tmp_path: Path) -> None:
    cache = RemoteCache(tmp_path / "cache",
                        openers={FetchKind.HTTP: _serve({"http://h.invalid/seed": b"seed"})})
    uri = UriSpec("http://h.invalid/seed")
    for n in (1, 2):
        spec = run(n, uri)
        assert not cache.ready(spec)
        cache.attach(cache.prepare(spec), spec, tmp_path / f"sb{n}")
        copy = tmp_path / f"sb{n}" / "seed"
        assert not copy.is_symlink() and copy.read_bytes() == b"seed"
        assert stat.S_IMODE(os.stat(copy).st_mode) == 0o644
    assert cache.downloads == 2 and list(cache.blobs.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="the rule guards what root could read")
def test_a_file_only_root_may_read_is_not_fetched(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("root only")
    os.chmod(secret, 0o600)
    cache = RemoteCache(tmp_path / "cache")
    with pytest.raises(PermissionDenied):
        cache.prepare(run(1, UriSpec(f"file://{secret}", cache=True)))


def test_http_errors_name_the_url(tmp_path: Path, http_root: str) -> None:
    cache = RemoteCache(tmp_path / "cache")
    with pytest.raises(FailedPrecondition, match=f"remote volume {http_root}/missing: HTTP 404"):
        cache.prepare(run(1, UriSpec(f"{http_root}/missing", cache=True)))
    spec = run(2, UriSpec(f"{http_root}/v1.txt", cache=True))
    cache.attach(cache.prepare(spec), spec, tmp_path / "sb")
    assert (tmp_path / "sb" / "v1.txt").read_text() == "version 1\n"


def test_the_cache_lives_beside_the_sandboxes(tmp_path: Path) -> None:
    assert remote_root(tmp_path, tmp_path / "sandboxes") == tmp_path / "remote-volumes"
    assert remote_root(tmp_path, Path("/var/lib/x/ab")) == Path("/var/lib/x/ab.remote")


# -- the budget ---------------------------------------------------------------------------------
class _Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        self.now += 1
        return self.now


def _budgeted(root: Path, budget: int, blobs: dict[str, bytes], clock: _Clock) -> RemoteCache:
    return RemoteCache(root, budget_mb=budget / MB, openers={FetchKind.HTTP: _serve(blobs)},
                       wall=clock)


BLOBS = {f"http://h.invalid/{n}": n.encode() * 10 for n in "abcd"}  # 10 bytes each


def _names(cache: RemoteCache) -> set[str]:
    return {p.name for p in cache.blobs.iterdir()}


def test_the_least_recently_used_entries_go_and_the_budget_holds(tmp_path: Path) -> None:
    cache = _budgeted(tmp_path / "cache", 25, BLOBS, _Clock())
    for n, name in enumerate("abc"):
        spec = run(n, UriSpec(f"http://h.invalid/{name}", cache=True))
        cache.prepare(spec)
        cache.release(spec.run_id)
        # a is used again after b was fetched: b is now the least recently used
        if name == "b":
            again = run(9, UriSpec("http://h.invalid/a", cache=True))
            assert cache.ready(again)
            cache.prepare(again)
            cache.release(again.run_id)
        assert cache.used <= 25
    assert _names(cache) == {sha("a" * 10), sha("c" * 10)} and cache.evictions == 1
    # The evicted URL's index entry went with it: asked again, it is fetched again.
    assert len(list(cache.index.iterdir())) == 2
    assert not cache.ready(run(5, UriSpec("http://h.invalid/b", cache=True)))
    cache.prepare(run(5, UriSpec("http://h.invalid/b", cache=True)))
    assert cache.downloads == 4 and _names(cache) == {sha("b" * 10), sha("c" * 10)}


def test_held_entries_are_kept_over_budget_until_released(tmp_path: Path) -> None:
    cache = _budgeted(tmp_path / "cache", 15, BLOBS, _Clock())
    first, second = (run(n, UriSpec(f"http://h.invalid/{x}", cache=True))
                     for n, x in ((1, "a"), (2, "b")))
    cache.prepare(first)
    cache.prepare(second)  # a is held: the fetch proceeds, the cache is over budget
    assert cache.used == 20 and cache.evictions == 0
    assert (cache.users / first.run_id).read_text() == sha("a" * 10) + "\n"
    cache.release(second.run_id)  # b is the newest, but a is held: b goes
    assert _names(cache) == {sha("a" * 10)} and cache.used == 10
    cache.release(first.run_id)
    cache.release(first.run_id)  # idempotent
    assert cache.used == 10 and not (cache.users / first.run_id).exists()
    assert [(e.name, e.users) for e in cache.entries()] == [(sha("a" * 10), 0)]


def test_concurrent_askers_of_one_download_all_hold_it(tmp_path: Path) -> None:
    release = threading.Event()

    def slow(url: str, timeout: float) -> tuple[BinaryIO, int | None]:
        assert release.wait(10)
        return io.BytesIO(b"x" * 10), None

    cache = RemoteCache(tmp_path / "cache", budget_mb=10 / MB, openers={FetchKind.HTTP: slow})
    uri = UriSpec("http://h.invalid/x", cache=True)
    threads = [threading.Thread(target=cache.prepare, args=(run(n, uri),)) for n in range(3)]
    for t in threads:
        t.start()
    wait_for(lambda: [f.waiters for f in cache._flights.values()] == [2], 5, "2 waiting runs")
    release.set()
    for t in threads:
        t.join(10)
    assert [e.users for e in cache.entries()] == [3]


def test_a_restarted_agent_recovers_sizes_last_uses_and_holders(tmp_path: Path) -> None:
    clock = _Clock()
    cache = _budgeted(tmp_path / "cache", 30, BLOBS, clock)
    live, ended, old = (run(n, UriSpec(f"http://h.invalid/{x}", cache=True))
                        for n, x in ((1, "a"), (2, "b"), (3, "c")))
    for spec in (old, live, ended):  # c is the least recently used
        cache.prepare(spec)
    cache.release(old.run_id)
    cache.release(ended.run_id)
    before = {e.name: e for e in cache.entries()}

    again = _budgeted(tmp_path / "cache", 30, BLOBS, clock)
    assert again.used == 30
    assert {e.name: e for e in again.entries()} == before  # last uses from the mtimes
    again.prepare(run(4, UriSpec("http://h.invalid/d", cache=True)))
    assert _names(again) == {sha(x * 10) for x in "abd"}  # c went; a, held, stayed
    # Once the runs on disk are adopted, the holders that are gone are released.
    again.keep_users({f"{JOB}-0-4"})
    assert sha("a" * 10) in _names(again)  # within budget: released, not evicted
    assert [e.users for e in again.entries() if e.name == sha("a" * 10)] == [0]
    assert sorted(p.name for p in again.users.iterdir()) == [f"{JOB}-0-4"]


def test_a_smaller_budget_evicts_at_start(tmp_path: Path) -> None:
    cache = _budgeted(tmp_path / "cache", 100, BLOBS, _Clock())
    for n, x in enumerate("abc"):
        spec = run(n, UriSpec(f"http://h.invalid/{x}", cache=True))
        cache.prepare(spec)
        cache.release(spec.run_id)
    smaller = _budgeted(tmp_path / "cache", 10, BLOBS, _Clock())
    assert _names(smaller) == {sha("c" * 10)} and smaller.used == 10


def test_an_evicted_archive_is_removed_whole(tmp_path: Path) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("d/f.txt")
        info.size = 5
        tar.addfile(info, io.BytesIO(b"12345"))
    blobs = {"http://h.invalid/app.tgz": buf.getvalue(), "http://h.invalid/a": b"a" * 10}
    cache = _budgeted(tmp_path / "cache", 12, blobs, _Clock())
    tgz = run(1, UriSpec("http://h.invalid/app.tgz", cache=True))
    cache.prepare(tgz)
    assert cache.used == 5  # the unpacked files, not the archive
    cache.release(tgz.run_id)
    cache.prepare(run(2, UriSpec("http://h.invalid/a", cache=True)))
    assert _names(cache) == {sha("a" * 10)} and list(cache.tmp.iterdir()) == []


# -- the executor ------------------------------------------------------------------------------
class _Spawner:
    command = ["peloton-supervisor"]

    def __init__(self) -> None:
        self.requests: list[bytes] = []

    def spawn(self, data: bytes) -> None:
        self.requests.append(data)


def test_a_run_waits_for_its_fetch_and_a_kill_meanwhile_stops_it(tmp_path: Path) -> None:
    release = threading.Event()

    def slow(url: str, timeout: float) -> tuple[BinaryIO, int | None]:
        assert release.wait(10)
        return io.BytesIO(b"v1"), None

    published: list[tuple[str, TaskState, str]] = []
    reporter = StatusReporter(lambda batch: True)
    original = reporter.publish

    def publish(update, terminal=False):  # type: ignore[no-untyped-def]
        published.append((update.run_id, update.state, update.message))
        original(update, terminal=terminal)

    reporter.publish = publish  # type: ignore[method-assign]
    spawner = _Spawner()
    executor = Executor(sandboxes=Sandboxes(tmp_path, tmp_path / "sandboxes"),
                        isolation=MemoryIsolation("rlimit"), spawner=spawner,  # type: ignore[arg-type]
                        reporter=reporter, fifo=tmp_path / "notify",
                        identities=IdentityPolicy(dynamic_uids=(70000, 70009)),
                        remote=RemoteCache(tmp_path / "cache", openers={FetchKind.HTTP: slow}))
    uri = UriSpec("http://h.invalid/conf", cache=True)
    kept, killed = run(1, uri), run(2, uri)
    assert executor.launch([kept, killed]) == []
    assert spawner.requests == []  # the launch did not wait for the download
    assert [(s, m) for r, s, m in published if r == kept.run_id] == [
        (TaskState.STARTING, "fetching http://h.invalid/conf")]
    executor.kill([killed.run_id], 5.0)
    release.set()
    wait_for(lambda: len(spawner.requests) == 1, 10, "the fetched run's supervisor")
    assert kept.run_id.encode() in spawner.requests[0]
    assert killed.run_id.encode() not in spawner.requests[0]
    assert executor.runs[killed.run_id].state is TaskState.KILLED
    link = tmp_path / "sandboxes" / kept.run_id / "conf"
    assert link.is_symlink() and link.read_bytes() == b"v1"


def test_an_evicted_url_is_fetched_again_for_the_next_run(tmp_path: Path) -> None:
    spawner = _Spawner()
    cache = _budgeted(tmp_path / "cache", 15, BLOBS, _Clock())
    executor = Executor(sandboxes=Sandboxes(tmp_path, tmp_path / "sandboxes"),
                        isolation=MemoryIsolation("rlimit"), spawner=spawner,  # type: ignore[arg-type]
                        reporter=StatusReporter(lambda batch: True), fifo=tmp_path / "notify",
                        identities=IdentityPolicy(dynamic_uids=(70000, 70009)), remote=cache)
    a, b = UriSpec("http://h.invalid/a", cache=True), UriSpec("http://h.invalid/b", cache=True)

    def started(spec: RunSpec, n: int) -> None:
        assert executor.launch([spec]) == []
        wait_for(lambda: len(spawner.requests) == n, 10, f"the supervisor of {spec.run_id}")

    started(run(1, a), 1)
    started(run(2, b), 2)  # a is held by run 1: over budget, a kept
    assert cache.used == 20
    executor.lose(run(1, a).run_id, "gone")  # its end releases a, which goes
    assert _names(cache) == {sha("b" * 10)}
    executor.release_remote_of_dead_runs()  # run 2 is live: b stays held
    assert [e.users for e in cache.entries()] == [1]
    started(run(3, a), 3)  # fetched again (not ready: STARTING "fetching ...")
    assert cache.downloads == 3
    assert (tmp_path / "sandboxes" / run(3, a).run_id / "a").read_bytes() == b"a" * 10
    assert _names(cache) == {sha("a" * 10), sha("b" * 10)}  # b held by run 2, over budget


# -- helpers -----------------------------------------------------------------------------------
def _serve(blobs: dict[str, bytes]):  # type: ignore[no-untyped-def]
    def opener(url: str, timeout: float) -> tuple[BinaryIO, int | None]:
        return io.BytesIO(blobs[url]), len(blobs[url])
    return opener


@pytest.fixture
def http_root(tmp_path: Path) -> Iterator[str]:
    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "v1.txt").write_text("version 1\n")

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            super().__init__(*args, directory=str(tmp_path / "www"), **kwargs)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


# -- the wire between the host manager and the agent ---------------------------------------------
def test_a_launch_carries_its_uris_as_the_agent_fetches_them(tmp_path: Path) -> None:
    digest = sha("x")
    uris = (UriSpec(f"https://h.invalid/conf.tgz#sha256={digest}", cache=True),
            UriSpec("file:///srv/seed.bin", output_file="data/seed", executable=True))
    task = LaunchSpec(f"{JOB}-0-1", TaskSpec(command=CommandSpec("true", uris=uris)))
    got = run_spec_from_pb(launch_to_pb(task))
    assert got.remote == remote_volumes(uris) and got.remote_error == ""
    # A scheme only the Mesos fetcher has: the run carries why, and fails on the agent.
    hdfs = LaunchSpec(f"{JOB}-0-2", TaskSpec(command=CommandSpec(
        "true", uris=(UriSpec("hdfs://nn/data.bin"),))))
    failed = run_spec_from_pb(launch_to_pb(hdfs))
    assert failed.remote == () and "hdfs is fetched only by the Mesos fetcher" in failed.remote_error
    with pytest.raises(FailedPrecondition, match="hdfs is fetched only by the Mesos fetcher"):
        RemoteCache(tmp_path / "cache").prepare(failed)
