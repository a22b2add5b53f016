"""An agent's task ports and the machine's ephemeral range (peloton/agent/config.py).

A task port inside the range Linux picks outgoing connections' local ports from can be held
by any connection on the machine; the task given it fails to bind and its retry gets the
same port.  The agent says so at start, and `peloton up`'s default range stays below it.
"""

from __future__ import annotations

from pathlib import Path

from peloton.agent.config import ephemeral_overlap, ephemeral_range
from peloton.cluster.allinone import UpConfig
from peloton.core.model.resources import PortRange


def test_the_parts_inside_the_ephemeral_range_are_named() -> None:
    ephemeral = PortRange(32768, 60999)
    assert ephemeral_overlap((PortRange(31000, 32999),), ephemeral) == [PortRange(32768, 32999)]
    assert ephemeral_overlap((PortRange(31000, 32000), PortRange(40000, 40099)), ephemeral) == [
        PortRange(40000, 40099)]
    assert ephemeral_overlap((PortRange(31000, 32767),), ephemeral) == []
    assert ephemeral_overlap((PortRange(31000, 32999),), None) == []  # not Linux


def test_the_range_is_read_from_the_kernel_file(tmp_path: Path) -> None:
    path = tmp_path / "ip_local_port_range"
    path.write_text("32768\t60999\n")
    assert ephemeral_range(path) == PortRange(32768, 60999)
    path.write_text("garbage")
    assert ephemeral_range(path) is None
    assert ephemeral_range(tmp_path / "absent") is None


def test_peloton_up_offers_ports_below_linux_default_ephemeral_range() -> None:
    first, last = UpConfig().agent_ports
    assert ephemeral_overlap((PortRange(first, last),), PortRange(32768, 60999)) == []
