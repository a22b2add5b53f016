"""A table of error cases with Peloton's answer, and the check that we give the same answer.

Each `Case` names a request and what Peloton answers it with: a gRPC status
(`code` and `message`), or an OK reply whose `body` field holds the error
(its `message`).  Messages are exact unless `prefix` is set (where Peloton
appends text from a lower layer that is not part of the contract, such as
its config validator).  Texts are Peloton's, from the handler each table
cites; some are functions of the ids a test created.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc

Ids = dict[str, str]


@dataclass(frozen=True)
class Case:
    """One request and Peloton's answer to it."""

    name: str
    call: Callable[[Any, Ids], Any]
    #: The status code; OK with `body` set means "an error inside the reply".
    code: grpc.StatusCode = grpc.StatusCode.OK
    #: Dotted path of the error message in the reply, e.g. "error.notFound".
    body: str = ""
    message: str | Callable[[Ids], str] = ""
    prefix: bool = False

    def __str__(self) -> str:
        return self.name


def check(case: Case, cluster: Any, ids: Ids) -> None:
    """Make the call; assert Peloton's code, place and text."""
    want = case.message(ids) if callable(case.message) else case.message
    try:
        reply = case.call(cluster, ids)
    except grpc.RpcError as exc:
        assert exc.code() is case.code, (case.name, exc.code(), exc.details())
        _same(case, exc.details(), want)
        return
    assert case.code is grpc.StatusCode.OK, (case.name, "answered OK", reply)
    if not case.body:
        return
    node = reply
    for part in case.body.split("."):
        assert node.HasField(part), (case.name, f"no {part} in", reply)
        node = getattr(node, part)
    _same(case, node.message, want)


def _same(case: Case, got: str, want: str) -> None:
    if case.prefix:
        assert got.startswith(want), (case.name, got, want)
    else:
        assert got == want, (case.name, got, want)
