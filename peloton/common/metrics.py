"""Prometheus metrics for one daemon: a private registry, get-or-create helpers, an optional /metrics server.

No module-level registry: each daemon's composition root makes one
`Metrics` and hands it to the components that report, so two daemons in one
process (`peloton up`) never collide and tests read exactly what they made.
Names are `<namespace>_<daemon>_<name>` (`peloton_jobmgr_goalstate_actions_total`).

`MetricsServer` is a `Component` serving the registry over HTTP (every path
answers with the text exposition format; scrape `/metrics`).  To serve
several daemons' registries on one port, pass `combine([...])`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import start_http_server

from peloton.core.errors import InvalidArgument

M = TypeVar("M", Counter, Gauge, Histogram)

#: Seconds; from a millisecond RPC to a slow database round trip to a minute-long action.
DEFAULT_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


@dataclass(frozen=True, slots=True)
class MetricsConfig:
    """The `metrics` config section: `port` None serves nothing, 0 picks a free port."""

    port: int | None = None
    address: str = "127.0.0.1"

    def __post_init__(self) -> None:
        if self.port is not None and not 0 <= self.port <= 65535:
            raise InvalidArgument(f"port must be in 0..65535, got {self.port}", field="port")


class Metrics:
    """One daemon's metrics; asking twice for the same name returns the same collector."""

    def __init__(self, daemon: str, *, namespace: str = "peloton",
                 registry: CollectorRegistry | None = None) -> None:
        self.daemon = daemon
        self.namespace = namespace
        self.registry = registry if registry is not None else CollectorRegistry()
        self._collectors: dict[str, Any] = {}

    def counter(self, name: str, documentation: str, labels: Sequence[str] = ()) -> Counter:
        """A counter `<namespace>_<daemon>_<name>` (prometheus adds `_total` when exposing)."""
        return self._get(Counter, name, documentation, labels)

    def gauge(self, name: str, documentation: str, labels: Sequence[str] = ()) -> Gauge:
        """A gauge `<namespace>_<daemon>_<name>`."""
        return self._get(Gauge, name, documentation, labels)

    def histogram(self, name: str, documentation: str, labels: Sequence[str] = (),
                  buckets: Sequence[float] = DEFAULT_BUCKETS) -> Histogram:
        """A histogram `<namespace>_<daemon>_<name>` with the given buckets."""
        return self._get(Histogram, name, documentation, labels, buckets=tuple(buckets))

    def _get(self, kind: type[M], name: str, documentation: str, labels: Sequence[str],
             **extra: Any) -> M:
        existing = self._collectors.get(name)
        if existing is not None:
            if not isinstance(existing, kind):
                raise ValueError(f"metric {name} already registered as {type(existing).__name__}")
            return existing
        collector = kind(name, documentation, labelnames=tuple(labels), namespace=self.namespace,
                         subsystem=self.daemon, registry=self.registry, **extra)
        self._collectors[name] = collector
        return collector

    def render(self) -> bytes:
        """The registry in Prometheus text format (what `/metrics` serves)."""
        return generate_latest(self.registry)

    def value(self, name: str, labels: dict[str, str] | None = None) -> float | None:
        """The current value of a sample by full exposed name (for tests and health checks)."""
        return self.registry.get_sample_value(name, labels or {})


def combine(registries: Sequence[CollectorRegistry]) -> CollectorRegistry:
    """A registry that exposes the samples of several (one /metrics for `peloton up`)."""
    combined = CollectorRegistry(auto_describe=False)
    for registry in registries:
        combined.register(registry)
    return combined


class MetricsServer:
    """Serves a registry over HTTP on `address:port` while started; a `Component`."""

    name = "metrics-http"

    def __init__(self, registry: CollectorRegistry, port: int = 0, address: str = "127.0.0.1") -> None:
        self._registry = registry
        self._requested_port = port
        self.address = address
        self._server: Any = None
        self._thread: Any = None

    @property
    def port(self) -> int:
        """The bound port (the requested one, or the one picked for port 0) once started."""
        return int(self._server.server_port) if self._server is not None else self._requested_port

    def start(self) -> None:
        """Bind and serve in a background thread (a greenlet under monkey-patching)."""
        if self._server is None:
            self._server, self._thread = start_http_server(self._requested_port, self.address,
                                                           registry=self._registry)

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(5)
            self._server = self._thread = None


class GoalStateMetrics:
    """Goal-state engine hooks (`goalstate.EngineObserver`) reported through `Metrics`."""

    def __init__(self, metrics: Metrics, engine: str) -> None:
        self._engine = engine
        self._seconds = metrics.histogram("goalstate_action_seconds", "Goal-state action run time.",
                                          ("engine", "action"))
        self._failures = metrics.counter("goalstate_action_failures", "Goal-state actions that raised.",
                                         ("engine", "action"))
        self._scheduled = metrics.gauge("goalstate_scheduled", "Entities waiting in the deadline queue.",
                                        ("engine",))
        self._tracked = metrics.gauge("goalstate_tracked", "Entities tracked by the engine.", ("engine",))

    def action_finished(self, action: str, ok: bool, seconds: float) -> None:
        """Record an action's run time, and its failure."""
        self._seconds.labels(self._engine, action).observe(seconds)
        if not ok:
            self._failures.labels(self._engine, action).inc()

    def queue_changed(self, scheduled: int, tracked: int) -> None:
        """Record the queue sizes."""
        self._scheduled.labels(self._engine).set(scheduled)
        self._tracked.labels(self._engine).set(tracked)
