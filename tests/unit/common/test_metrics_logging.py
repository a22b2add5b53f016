"""Metrics: per-daemon registries and the /metrics endpoint.  Logging: plain and JSON lines."""

from __future__ import annotations

import io
import json
import logging
import urllib.request
from collections.abc import Iterator

import pytest

from peloton.common.logging import setup_logging
from peloton.common.metrics import Metrics, MetricsServer, combine
from peloton.core.errors import InvalidArgument


def test_daemons_have_separate_registries_and_names_are_shared_within_one() -> None:
    jobmgr, resmgr = Metrics("jobmgr"), Metrics("resmgr")
    jobmgr.counter("launches", "Tasks launched.").inc(3)
    resmgr.counter("launches", "Tasks launched.").inc()
    assert jobmgr.counter("launches", "again") is jobmgr.counter("launches", "x")
    assert jobmgr.value("peloton_jobmgr_launches_total") == 3.0
    assert jobmgr.value("peloton_resmgr_launches_total") is None
    assert resmgr.value("peloton_resmgr_launches_total") == 1.0
    with pytest.raises(ValueError, match="already registered"):
        jobmgr.gauge("launches", "a gauge now")


def test_metrics_server_serves_the_registry_on_a_free_port() -> None:
    jobmgr, resmgr = Metrics("jobmgr"), Metrics("resmgr")
    jobmgr.gauge("leader", "1 while leader.").set(1)
    resmgr.histogram("entitlement_seconds", "Entitlement cycle time.").observe(0.2)
    server = MetricsServer(combine([jobmgr.registry, resmgr.registry]), port=0)
    server.start()
    try:
        assert server.port > 0
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=5) as reply:
            body = reply.read().decode()
        assert "peloton_jobmgr_leader 1.0" in body
        assert "peloton_resmgr_entitlement_seconds_count 1.0" in body
    finally:
        server.stop()
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=2)


@pytest.fixture
def restore_root_logger() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.mark.usefixtures("restore_root_logger")
def test_json_lines_carry_level_logger_message_extras_and_traceback() -> None:
    out = io.StringIO()
    setup_logging("INFO", json_lines=True, daemon="jobmgr", stream=out)
    log = logging.getLogger("peloton.test")
    log.debug("hidden")
    log.info("task %s launched", "j-1-0", extra={"host": "h1"})
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("failed")
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert len(lines) == 2
    assert lines[0]["msg"] == "task j-1-0 launched" and lines[0]["level"] == "INFO"
    assert lines[0]["logger"] == "peloton.test" and lines[0]["daemon"] == "jobmgr"
    assert lines[0]["host"] == "h1" and lines[0]["ts"].endswith("+00:00")
    assert "ValueError: boom" in lines[1]["exc"]


@pytest.mark.usefixtures("restore_root_logger")
def test_setup_again_replaces_its_own_handler_and_rejects_unknown_levels() -> None:
    first, second = io.StringIO(), io.StringIO()
    setup_logging("INFO", stream=first)
    setup_logging("WARNING", daemon="resmgr", stream=second)
    logging.getLogger("peloton.test").warning("once")
    assert first.getvalue() == ""
    assert second.getvalue().startswith("[resmgr] ") and "WARNING peloton.test: once" in second.getvalue()
    with pytest.raises(InvalidArgument):
        setup_logging("LOUD")
