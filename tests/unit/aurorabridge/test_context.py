"""The handlers' context is built whole: nothing is attached to it after construction."""

from __future__ import annotations

import pytest

from aurorabridge.config import HandlerSettings, RespoolSettings
from aurorabridge.handlers import handler_table
from aurorabridge.handlers.context import BridgeContext
from aurorabridge.respool_loader import RespoolLoader
from tests.harness.fake_peloton import FakePeloton
from tests.unit.aurorabridge.conftest import FakeClock


def test_a_context_cannot_be_built_without_its_pulse_action() -> None:
    fake = FakePeloton()
    with pytest.raises(TypeError, match="on_pulse_expired"):
        BridgeContext(fake, RespoolLoader(fake, RespoolSettings()))  # type: ignore[call-arg]


def test_the_pulse_timer_calls_the_action_given_at_construction() -> None:
    fake, clock = FakePeloton(), FakeClock()
    expired: list[tuple[BridgeContext, str, str]] = []
    ctx = BridgeContext(fake, RespoolLoader(fake, RespoolSettings()), HandlerSettings(), clock=clock,
                        on_pulse_expired=lambda c, job, update: expired.append((c, job, update)))
    action = ctx.on_pulse_expired
    handler_table(ctx)  # binds the handlers; leaves the context as built
    assert ctx.on_pulse_expired is action
    ctx.pulses.arm("job-1", "update-1", 500)
    clock.advance(1.0)
    assert ctx.pulses.tick() == 1
    assert expired == [(ctx, "job-1", "update-1")]
