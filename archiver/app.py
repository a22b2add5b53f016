"""Composition root of the archiver: config + Peloton client + sink -> a loop of archive passes.

`Archiver` is a component like every daemon (`start()`/`stop()`): one
greenlet sleeps `bootstrap_delay` (plus jitter) so a job manager that is
recovering is not loaded at once, then runs a pass (archiver/engine.py)
every `archive_interval` (plus up to `jitter_max`, so several archivers
would not run in lock step).  A pass that fails is logged and the next
one repeats its windows.  Clock, sleep and randomness are injected, so
tests drive the loop without waiting.

Like Peloton's, the archiver needs no leader election: it keeps no state
that matters (the sink is idempotent, hot storage holds every job not yet
deleted), so a second instance only repeats work.  Stopping kills the
greenlet wherever it is; the engine's ordering makes that safe.

`run(...)` is the process entry point of `peloton archiver`.
"""

from __future__ import annotations

import logging
import random
import signal
import time
from collections.abc import Callable

import gevent
from gevent.event import Event

from archiver.collect import PelotonJobs
from archiver.config import ArchiverConfig
from archiver.engine import ArchiveEngine, PassReport
from archiver.sinks import ArchiveSink, open_sink
from peloton.common.clock import SYSTEM_CLOCK
from peloton.common.retry import Retrier

log = logging.getLogger(__name__)


class Archiver:
    """Runs archive passes in a greenlet until stopped."""

    name = "archiver"

    def __init__(self, config: ArchiverConfig, client: PelotonJobs, sink: ArchiveSink, *,
                 clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = gevent.sleep,
                 rand: Callable[[], float] = random.random) -> None:
        self.config = config
        self.sink = sink
        self._clock, self._sleep, self._rand = clock, sleep, rand
        retrier = Retrier(config.retry_policy(), sleep=sleep, clock=SYSTEM_CLOCK, rand=rand,
                          on_retry=lambda n, exc, delay: log.warning(
                              "archiver: call failed (%s); retry %d in %.1fs", exc, n, delay))
        self.engine = ArchiveEngine(client, sink, config, retrier=retrier, sleep=sleep)
        self.passes = 0
        self.last_report: PassReport | None = None
        self.last_error: BaseException | None = None
        self._greenlet: gevent.Greenlet | None = None

    def start(self) -> None:
        """Spawn the loop (returns at once)."""
        if self._greenlet is None:
            self._greenlet = gevent.spawn(self.run_forever)

    def stop(self) -> None:
        """Kill the loop and wait for it to exit."""
        if self._greenlet is not None:
            self._greenlet.kill(block=True, timeout=10)
            self._greenlet = None

    def run_forever(self) -> None:
        """Bootstrap delay, then a pass every interval; never returns (kill the greenlet)."""
        self._sleep(self.config.bootstrap_delay + self._jitter())
        while True:
            try:
                self.run_once()
            except Exception as exc:  # the next pass repeats the same windows
                self.last_error = exc
                log.exception("archiver: pass failed; nothing was deleted after the failure")
            self._sleep(self.config.archive_interval + self._jitter())

    def run_once(self) -> PassReport:
        """One pass now (also `peloton archiver --once`)."""
        report = self.engine.run_pass(self._clock())
        self.passes += 1
        self.last_report = report
        log.info("archiver: pass %d: %d terminal job(s) found, %d archived (%d already), "
                 "%d deleted, %d delete failure(s), %d non-batch kept, %d instance(s) trimmed",
                 self.passes, report.found, report.archived, report.already_archived,
                 report.deleted, report.delete_failures, report.skipped, report.trimmed_instances)
        for error in report.errors:
            log.warning("archiver: %s", error)
        return report

    def _jitter(self) -> float:
        return self._rand() * self.config.jitter_max


def run(archive_url: str, config: ArchiverConfig, client: PelotonJobs, *, once: bool = False,
        announce: Callable[[str], None] = print) -> PassReport | None:
    """Run the archiver until SIGTERM/SIGINT (or one pass with `once`); gevent must be set up."""
    sink = open_sink(archive_url)
    archiver = Archiver(config, client, sink)
    try:
        if once:
            return archiver.run_once()
        done = Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            gevent.signal_handler(sig, done.set)
        archiver.start()
        announce(f"archiver: archiving terminal batch jobs older than {config.archive_age:g}s "
                 f"into {sink.url} every {config.archive_interval:g}s")
        done.wait()
        archiver.stop()
        return None
    finally:
        sink.close()
