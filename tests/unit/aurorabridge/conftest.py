"""Fixtures: the bridge's handlers over an in-memory FakePeloton, and an HTTP server in a thread."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from aurorabridge.config import HandlerSettings, RespoolSettings
from aurorabridge.handlers import handler_table, updates
from aurorabridge.handlers.context import BridgeContext
from aurorabridge.http_server import ApiApp
from aurorabridge.processor import ThriftProcessor
from aurorabridge.respool_loader import RespoolLoader
from aurorabridge.thrift_api import args_class
from tests.harness.bridge_http import serving
from tests.harness.fake_peloton import FakePeloton


class FakeClock:
    """A monotonic clock tests move by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def fake() -> FakePeloton:
    return FakePeloton(hosts=("host-1", "host-2"))


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def ctx(fake: FakePeloton, clock: FakeClock) -> BridgeContext:
    loader = RespoolLoader(fake, RespoolSettings(retry_for_s=0, retry_interval_s=0))
    return BridgeContext(fake, loader, HandlerSettings(workers=4), clock=clock,
                         on_pulse_expired=updates.pulse_expired)


Call = Callable[..., Any]


@pytest.fixture
def call(ctx: BridgeContext) -> Call:
    """`call("method", arg=value, ...)` -> the Aurora Response, as the processor would produce it."""
    table = handler_table(ctx)

    def invoke(method: str, **kwargs: Any) -> Any:
        return table[method](args_class(method)(**kwargs))

    return invoke


def messages(response: Any) -> str:
    """All detail messages of a Response, joined."""
    return " | ".join(d.message for d in response.details or [])


@dataclass
class ServedBridge:
    port: int
    fake: FakePeloton
    ctx: BridgeContext


@pytest.fixture
def served(fake: FakePeloton) -> Iterator[ServedBridge]:
    """The whole bridge (handlers + HTTP) on 127.0.0.1 in a thread with its own gevent hub."""
    ctx = BridgeContext(fake, RespoolLoader(fake, RespoolSettings(retry_for_s=0)), HandlerSettings(workers=4),
                        on_pulse_expired=updates.pulse_expired)
    app = ApiApp(ThriftProcessor(handler_table(ctx)), max_body_bytes=1024 * 1024)
    with serving(app) as port:
        yield ServedBridge(port, fake, ctx)
