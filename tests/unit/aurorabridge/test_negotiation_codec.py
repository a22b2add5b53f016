"""Protocol negotiation (Aurora's TContentAwareServlet rules) and the call decoder."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aurorabridge import codec, wirecheck
from aurorabridge.negotiation import Codec, Negotiated, Unsupported, input_codec, negotiate, output_codec
from aurorabridge.processor import ThriftProcessor
from aurorabridge.responses import ok
from aurorabridge.thrift_api import api, args_class
from tests.unit.aurorabridge.wire import BINARY, encode_call


@pytest.mark.parametrize(
    ("content_type", "expected"),
    [
        (None, Codec.JSON),
        ("", Codec.JSON),
        ("application/x-thrift", Codec.JSON),
        ("application/json", Codec.JSON),
        ("application/vnd.apache.thrift.json", Codec.JSON),
        ("application/vnd.apache.thrift.json; charset=utf-8", Codec.JSON),
        ("APPLICATION/JSON", Codec.JSON),
        (BINARY, Codec.BINARY),
        ("text/plain", None),
        ("application/json; charset=iso-8859-1", None),
        ("application/octet-stream", None),
    ],
)
def test_input_protocol_by_content_type(content_type: str | None, expected: Codec | None) -> None:
    assert input_codec(content_type) is expected


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        (None, Codec.JSON),
        (BINARY, Codec.BINARY),
        (f" {BINARY.upper()} ", Codec.BINARY),
        ("application/json", Codec.JSON),
        (f"{BINARY}, application/json", Codec.JSON),
        ("*/*", Codec.JSON),
    ],
)
def test_output_protocol_by_accept(accept: str | None, expected: Codec) -> None:
    assert output_codec(accept) is expected


def test_negotiate_uses_the_last_content_type_and_detects_yarpc() -> None:
    assert negotiate({"content-type": ["application/x-thrift", BINARY], "accept": [BINARY]}) == Negotiated(
        Codec.BINARY, Codec.BINARY
    )
    assert negotiate({"content-type": ["text/xml"]}) == Unsupported(415, "Unsupported Content-Type: text/xml")
    yarpc = negotiate({"rpc-procedure": ["AuroraSchedulerManager::killTasks"], "content-type": ["text/xml"]})
    assert yarpc == Negotiated(Codec.BINARY, Codec.BINARY, ("AuroraSchedulerManager", "killTasks"))
    assert isinstance(negotiate({"rpc-procedure": ["killTasks"]}), Unsupported)


def test_binary_envelopes_strict_old_style_and_bare() -> None:
    args = args_class("getJobSummary")(role="www")
    strict = encode_call("getJobSummary", args)
    assert codec.read_binary(strict).args.role == "www"
    name = b"getJobSummary"
    old = (
        len(name).to_bytes(4, "big")
        + name
        + b"\x01"
        + (9).to_bytes(4, "big")
        + strict[4 + 4 + len(name) + 4 :]
    )
    call = codec.read_binary(old)
    assert (call.method, call.seqid, call.args.role) == ("getJobSummary", 9, "www")
    bare = encode_call("getJobSummary", args, envelope=False)
    call = codec.read_binary(bare, yarpc_method="getJobSummary")
    assert not call.enveloped and call.args.role == "www"
    assert codec.read_binary(b"\x00", yarpc_method="getRoleSummary").method == "getRoleSummary"
    with pytest.raises(codec.BadArguments, match="Rpc-Procedure names"):
        codec.read_binary(strict, yarpc_method="getJobs")


def test_reply_mirrors_the_request_envelope() -> None:
    result = api.AuroraAdmin.getTierConfigs_result(success=api.Response(responseCode=1))
    enveloped = codec.write_reply(Codec.BINARY, codec.Call("getTierConfigs", 3, None), result)
    bare = codec.write_reply(Codec.BINARY, codec.Call("getTierConfigs", 3, None, enveloped=False), result)
    assert enveloped.startswith(b"\x80\x01\x00\x02") and enveloped.endswith(bare)


def test_decoding_failures_are_classified() -> None:
    with pytest.raises(codec.UndecodableMessage):
        codec.read_binary(b"\x80\x01\x00\x02" + b"\x00" * 8)  # a reply, not a call
    with pytest.raises(codec.UndecodableMessage):
        codec.read_json(b'[2,"getJobs",1,1,{}]')
    with pytest.raises(codec.UnknownMethod):
        codec.read_json(b'[1,"launchMissiles",1,1,{}]')
    with pytest.raises(codec.BadArguments, match="unknown field id 42 in JobKey"):
        codec.read_json(b'[1,"getConfigSummary",1,1,{"1":{"rec":{"42":{"str":"x"}}}}]')
    with pytest.raises(codec.BadArguments, match="does not fit in i32"):
        codec.read_json(b'[1,"killTasks",1,1,{"5":{"set":["i32",1,4294967296]}}]')
    with pytest.raises(codec.BadArguments, match="count"):
        codec.read_json(b'[1,"killTasks",1,1,{"5":{"set":["i32",3,1]}}]')


def test_json_special_doubles_bools_and_maps_pass_the_check() -> None:
    task = {
        "32": {"set": ["rec", 1, {"1": {"dbl": "NaN"}}]},
        "7": {"tf": 1},
        "22": {"map": ["str", "str", 1, {"a": "b"}]},
    }
    wirecheck.check_json_struct({"1": {"rec": {"6": {"rec": task}}}}, args_class("populateJobConfig"), "args")
    with pytest.raises(wirecheck.WireError, match="expected 0 or 1"):
        wirecheck.check_json_struct(
            {"1": {"rec": {"6": {"rec": {"7": {"tf": 2}}}}}}, args_class("populateJobConfig"), "args"
        )


def test_binary_unknown_fields_are_skipped_and_utf8_is_checked() -> None:
    header = encode_call("getJobSummary")[:-1]
    call = codec.read_binary(header + b"\x0b\x00\x63\x00\x00\x00\x01x" + b"\x0b\x00\x01\x00\x00\x00\x01r\x00")
    assert call.args.role == "r"
    with pytest.raises(codec.BadArguments, match="UTF-8"):
        codec.read_binary(header + b"\x0b\x00\x01\x00\x00\x00\x01\xff\x00")


@given(body=st.binary(max_size=300), json_input=st.booleans(), yarpc=st.booleans())
@settings(max_examples=300, deadline=None)
def test_no_body_crashes_the_processor(body: bytes, json_input: bool, yarpc: bool) -> None:
    processor = ThriftProcessor({"getJobSummary": lambda args: ok()})
    neg = Negotiated(Codec.JSON if json_input else Codec.BINARY, Codec.BINARY,
                     ("ReadOnlyScheduler", "getJobSummary") if yarpc and not json_input else None)
    reply = processor.process(neg, body, [])
    assert reply.status in (200, 400)


@given(prefix=st.sampled_from([encode_call("getJobSummary"), encode_call("killTasks")]),
       tail=st.binary(max_size=200))
@settings(max_examples=300, deadline=None)
def test_mangled_arguments_are_invalid_requests_not_crashes(prefix: bytes, tail: bytes) -> None:
    processor = ThriftProcessor({"getJobSummary": lambda args: ok(), "killTasks": lambda args: ok()})
    reply = processor.process(Negotiated(Codec.BINARY, Codec.BINARY), prefix[:-1] + tail, [])
    assert reply.status == 200
