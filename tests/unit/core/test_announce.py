"""Announce labels, paths and endpoints (peloton.core.model.announce), with Aurora's executor's rules:
its PortResolver examples, `resolve_ports` (assigned ports over the portmap) and `make_endpoints`
(primary port 0 when it was not allocated)."""

from __future__ import annotations

import pytest

from peloton.core.errors import InvalidArgument
from peloton.core.model.announce import (
    ANNOUNCE_LABEL,
    PORTMAP_LABEL,
    PRIMARY_PORT_LABEL,
    Announce,
    announce_of,
    endpoints,
    parse_portmap,
    portmap_label_value,
    resolve_ports,
    serverset_path,
)
from peloton.core.model.constraints import Label


def test_no_announce_label_means_not_announced() -> None:
    assert announce_of([Label("x", "y"), Label(PRIMARY_PORT_LABEL, "http")]) is None


def test_defaults_are_auroras_announcer() -> None:
    found = announce_of([Label(ANNOUNCE_LABEL, "")])
    assert found == Announce("", "http", (("aurora", "http"),))
    assert announce_of([Label(ANNOUNCE_LABEL, "/s"), Label(PRIMARY_PORT_LABEL, "thrift")]) == \
        Announce("/s", "thrift", (("aurora", "thrift"),))


def test_portmap_json_binds_primary_port_and_numbers() -> None:
    text = '{"aurora": "{{primary_port}}", "https": 443, "admin": "8080"}'
    assert parse_portmap(text, "web") == (("admin", 8080), ("aurora", "web"), ("https", 443))
    assert portmap_label_value((("https", 443), ("aurora", "http"))) == '{"aurora":"http","https":443}'


@pytest.mark.parametrize("text", ["[1]", "{", '{"a": true}', '{"a": 70000}', '{"a": [1]}'])
def test_bad_portmaps_are_refused_naming_the_label(text: str) -> None:
    with pytest.raises(InvalidArgument) as err:
        announce_of([Label(ANNOUNCE_LABEL, "/x"), Label(PORTMAP_LABEL, text)])
    assert err.value.field == f"labels.{PORTMAP_LABEL}"


@pytest.mark.parametrize("path", ["/a//b", "a/../b", "/./x"])
def test_bad_paths_are_refused(path: str) -> None:
    with pytest.raises(InvalidArgument):
        announce_of([Label(ANNOUNCE_LABEL, path)])


def test_paths_absolute_relative_and_default() -> None:
    assert serverset_path(Announce("/services/web/"), "/aurora", "www/prod/hello") == "/services/web"
    assert serverset_path(Announce("www/prod/hello"), "/aurora", "ignored") == "/aurora/www/prod/hello"
    assert serverset_path(Announce(""), "/aurora/", "www/prod/hello") == "/aurora/www/prod/hello"
    assert serverset_path(Announce(""), "/", "job") == "/job"


def test_port_resolver_follows_aliases_to_numbers() -> None:
    # Aurora's PortResolver docstring example; an alias of nothing numeric is left out.
    portmap = (("http", 80), ("aurora", "http"), ("https", "aurora"), ("thrift", "service"))
    assert resolve_ports(portmap, {}) == {"http": 80, "aurora": 80, "https": 80}


def test_assigned_ports_win_over_the_portmap() -> None:
    assert resolve_ports((("aurora", "http"), ("http", 80)), {"http": 31001, "admin": 31002}) == \
        {"aurora": 31001, "http": 31001, "admin": 31002}


def test_a_cycle_resolves_to_nothing() -> None:
    assert resolve_ports((("a", "b"), ("b", "a")), {}) == {}


def test_endpoints_primary_and_named() -> None:
    announce = Announce("", "http", (("aurora", "http"),))
    found = endpoints(announce, "host-1", {"http": 31001, "admin": 31002})
    assert found.host == "host-1" and found.primary == 31001
    assert dict(found.named) == {"http": 31001, "aurora": 31001, "admin": 31002}
    # A primary port the run was not given is announced as port 0, as Aurora does.
    assert endpoints(Announce("", "thrift", ()), "h", {"http": 1}).primary == 0
