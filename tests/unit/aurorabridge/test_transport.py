"""The HTTP front over raw sockets: protocol negotiation, YARPC form, garbage, limits, keep-alive."""

from __future__ import annotations

import http.client
import os
import socket

from aurorabridge.thrift_api import api, args_class
from tests.unit.aurorabridge.conftest import ServedBridge
from tests.unit.aurorabridge.wire import BINARY, decode_reply, encode_call, post

OK = api.ResponseCode.OK
INVALID = api.ResponseCode.INVALID_REQUEST


def test_binary_in_binary_out_when_accept_is_binary(served: ServedBridge) -> None:
    status, headers, body = post(
        served.port, encode_call("getTierConfigs"), {"Content-Type": BINARY, "Accept": BINARY}
    )
    assert status == 200 and headers["content-type"] == BINARY
    assert decode_reply("getTierConfigs", body).result.getTierConfigResult.defaultTierName == "preemptible"


def test_binary_in_json_out_without_accept(served: ServedBridge) -> None:
    status, headers, body = post(served.port, encode_call("getTierConfigs"), {"Content-Type": BINARY})
    assert status == 200 and headers["content-type"] == "application/vnd.apache.thrift.json"
    assert body.startswith(b'[1,"getTierConfigs",2,7,')
    assert decode_reply("getTierConfigs", body, json=True).responseCode == OK


def test_every_json_content_type_and_none_is_read_as_tjson(served: ServedBridge) -> None:
    call = encode_call("getJobSummary", args_class("getJobSummary")(role="www"), json=True)
    for content_type in (
        "application/x-thrift",
        "application/json",
        "application/vnd.apache.thrift.json",
        "application/vnd.apache.thrift.json; charset=utf-8",
        None,
    ):
        headers = {"Content-Type": content_type} if content_type else {}
        status, _, body = post(served.port, call, headers)
        assert status == 200, content_type
        assert decode_reply("getJobSummary", body, json=True).responseCode == OK, content_type


def test_other_content_types_are_http_415(served: ServedBridge) -> None:
    for content_type in ("text/html", "application/xml", "application/json; charset=latin1"):
        status, _, body = post(served.port, b"{}", {"Content-Type": content_type})
        assert status == 415 and b"Unsupported Content-Type" in body


def test_the_last_of_two_content_type_headers_wins(served: ServedBridge) -> None:
    # Apache's THttpClient sends its own x-thrift header before a custom binary one.
    headers = [("Content-Type", "application/x-thrift"), ("Content-Type", BINARY), ("Accept", BINARY)]
    status, _, body = post(served.port, encode_call("getTierConfigs"), headers)
    assert status == 200
    assert decode_reply("getTierConfigs", body).responseCode == OK


def test_get_is_treated_as_post(served: ServedBridge) -> None:
    status, _, body = post(
        served.port, encode_call("getTierConfigs"), {"Content-Type": BINARY, "Accept": BINARY}, method="GET"
    )
    assert status == 200 and decode_reply("getTierConfigs", body).responseCode == OK


def test_empty_and_garbage_bodies_get_an_application_exception(served: ServedBridge) -> None:
    for body, content_type in (
        (b"", BINARY),
        (b"", "application/x-thrift"),
        (os.urandom(64), BINARY),
        (b"\x80\x01\x00\x01\x00\x00\x00\x05", BINARY),
        (b"not json", "application/json"),
        (b"[1,2,3]", "application/json"),
        (b"\xff\xfe{", "application/json"),
    ):
        status, _, reply = post(served.port, body, {"Content-Type": content_type, "Accept": BINARY})
        assert status == 200, body
        exc = decode_reply("", reply)
        assert exc.type == exc.PROTOCOL_ERROR and exc.message, body


def test_unknown_method_is_an_application_exception_with_a_message(served: ServedBridge) -> None:
    for json in (False, True):
        body = encode_call("getTierConfigs", json=json).replace(b"getTierConfigs", b"getNothingAtAl")
        status, _, reply = post(
            served.port, body, {"Content-Type": "application/json" if json else BINARY, "Accept": BINARY}
        )
        exc = decode_reply("getNothingAtAl", reply)
        assert status == 200 and exc.type == exc.UNKNOWN_METHOD and "getNothingAtAl" in exc.message


def test_unknown_field_and_wrong_types_are_invalid_request(served: ServedBridge) -> None:
    cases = {
        b'[1,"getJobSummary",1,1,{"99":{"str":"x"}}]': "unknown field id 99",
        b'[1,"getJobSummary",1,1,{"1":{"i32":5}}]': "expected str, got i32",
        b'[1,"getJobSummary",1,1,{"1":{"str":5}}]': "expected a string",
        b'[1,"killTasks",1,1,{"4":{"rec":{"1":{"str":"a"},"2":{"str":"b"},"3":{"str":"c"}}},'
        b'"5":{"set":["i32",1,"x"]}}]': "expected an integer",
        b'[1,"getTasksStatus",1,1,{"1":{"rec":{"5":{"set":["i32",1,99]}}}}]': "not a valid ScheduleStatus",
    }
    for body, expected in cases.items():
        status, _, reply = post(served.port, body, {"Content-Type": "application/json"})
        response = decode_reply("getJobSummary", reply, json=True)
        assert status == 200 and response.responseCode == INVALID, body
        assert expected in response.details[0].message, response.details[0].message


def test_binary_wrong_field_type_and_hostile_lengths_are_invalid_request(served: ServedBridge) -> None:
    header = encode_call("getJobSummary")[:-1]  # envelope + empty args without the STOP byte
    bodies = [
        header + b"\x08\x00\x01\x00\x00\x00\x05\x00",  # role as i32
        header + b"\x0b\x00\x01\x7f\xff\xff\xff",  # string longer than the body
        header + b"\x0f\x00\x63\x08\x7f\xff\xff\xff",  # unknown list claiming 2^31 items
        header + b"\x0c\x00\x63" * 200,
    ]  # nesting far too deep
    for body in bodies:
        status, _, reply = post(served.port, body, {"Content-Type": BINARY, "Accept": BINARY})
        response = decode_reply("getJobSummary", reply)
        assert status == 200 and response.responseCode == INVALID, body
        assert "getJobSummary" in response.details[0].message or "field" in response.details[0].message


def test_oversized_body_is_refused_before_reading(served: ServedBridge) -> None:
    status, _, body = post(served.port, b"x" * (1024 * 1024 + 1), {"Content-Type": BINARY})
    assert status == 413 and b"exceeds" in body


def test_other_paths_and_methods(served: ServedBridge) -> None:
    assert post(served.port, b"", {}, path="/nope")[0] == 404
    assert post(served.port, b"", {}, method="PUT")[0] == 405
    assert post(served.port, b"", {}, method="GET", path="/health")[:3:2] == (200, b"OK")


def test_yarpc_form_with_and_without_envelope(served: ServedBridge) -> None:
    args = args_class("getJobSummary")(role="www")
    base = {
        "Rpc-Caller": "test",
        "Rpc-Service": "peloton-aurorabridge",
        "Rpc-Encoding": "thrift",
        "Context-TTL-MS": "5000",
        "Rpc-Procedure": "ReadOnlyScheduler::getJobSummary",
    }
    for envelope in (True, False):
        status, headers, body = post(served.port, encode_call("getJobSummary", args, envelope=envelope), base)
        assert status == 200 and headers["rpc-status"] == "success"
        assert headers["content-type"] == BINARY and headers["context-ttl-ms"] == "5000"
        assert body.startswith(b"\x80\x01") == envelope
        assert decode_reply("getJobSummary", body, envelope=envelope).responseCode == OK
    manager = dict(base, **{"Rpc-Procedure": "AuroraSchedulerManager::getTierConfigs"})
    status, _, body = post(served.port, encode_call("getTierConfigs", envelope=False), manager)
    assert status == 200 and decode_reply("getTierConfigs", body, envelope=False).responseCode == OK


def test_yarpc_errors_are_yarpc_http_errors(served: ServedBridge) -> None:
    wrong = {"Rpc-Procedure": "ReadOnlyScheduler::killTasks"}  # not a read-only method
    status, headers, body = post(served.port, encode_call("killTasks", envelope=False), wrong)
    assert status == 501 and headers["rpc-status"] == "error" and b"killTasks" in body
    assert post(served.port, b"", {"Rpc-Procedure": "nonsense"})[0] == 400
    status, headers, body = post(
        served.port, b"\x0b\x00\x01\xff", {"Rpc-Procedure": "ReadOnlyScheduler::getJobs"}
    )
    assert status == 200  # known method, bad bare args: a Response naming the problem
    response = decode_reply("getJobs", body, envelope=False)
    assert response.responseCode == INVALID


def test_keep_alive_serves_many_calls_on_one_connection_with_nodelay(served: ServedBridge) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=10)
    conn.connect()
    conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    body = encode_call("getTierConfigs")
    for _ in range(20):
        conn.request("POST", "/api", body, {"Content-Type": BINARY, "Accept": BINARY})
        resp = conn.getresponse()
        assert resp.status == 200 and decode_reply("getTierConfigs", resp.read()).responseCode == OK
    conn.close()
