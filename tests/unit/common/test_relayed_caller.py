"""Calls relayed for a caller (peloton/common/auth/authenticator.py): a job manager member
forwarding a call names the caller it authenticated in `peloton-caller`, and the receiving
side believes that name only from an internal peer.  The same rule over gRPC, with mutual
TLS: tests/unit/jobmgr_servicers/test_forwarding.py."""

from __future__ import annotations

from typing import Any

import pytest

from peloton.common.auth import config as auth_config
from peloton.common.auth import passwords
from peloton.common.auth.authenticator import (
    CALLER_KEY,
    Credentials,
    OpenAuthenticator,
    UsersAuthenticator,
    relayed_metadata,
)
from peloton.common.auth.policy import Principal, Role
from peloton.common.auth.tokens import TokenSigner
from peloton.core.errors import Unauthenticated

INTERNAL = (("username", "peloton"), ("password", "internal"))


def users(default: bool = True) -> dict[str, Any]:
    def hashed(pw: str) -> str:
        return passwords.hash_password(pw, log_n=10)

    return {
        "users": ([{"role": "reader"}] if default else []) + [
            {"username": "alice", "role": "dev", "password_hash": hashed("a")},
            {"username": "zoë", "role": "dev", "password_hash": hashed("z")},
            {"username": "peloton", "role": "root", "password_hash": hashed("internal"),
             "certificate": True},
            {"username": "agent-1", "role": "agent", "certificate": True}],
        "roles": [{"role": "reader", "accept": ["s.A:Get*"]},
                  {"role": "dev", "accept": ["s.A:*"]},
                  {"role": "root", "accept": ["*"]},
                  {"role": "agent", "accept": ["pelotonpy.internal.agent.AgentRegistry:*"]}],
        "internal_user": "peloton",
    }


@pytest.fixture(scope="module")
def auth() -> UsersAuthenticator:
    return UsersAuthenticator(auth_config.parse(users()), TokenSigner(b"t" * 32))


def who(auth: UsersAuthenticator, metadata: Any, certificate: str = "") -> tuple[str, str, str]:
    p = auth.authenticate(Credentials.from_metadata(metadata, certificate))
    return p.name, p.role.name, p.method


def test_a_caller_named_by_an_internal_peer_is_that_caller_with_its_own_role(
        auth: UsersAuthenticator) -> None:
    named = ((CALLER_KEY, "alice"),)
    assert who(auth, (*INTERNAL, *named)) == ("alice", "dev", "forwarded")  # by password
    assert who(auth, named, certificate="peloton") == ("alice", "dev", "forwarded")  # by cert
    assert who(auth, (*INTERNAL, (CALLER_KEY, ""))) == ("", "reader", "default")
    assert who(auth, (*INTERNAL, (CALLER_KEY, "peloton"))) == ("peloton", "root", "forwarded")


def test_a_caller_named_by_anyone_else_is_ignored(auth: UsersAuthenticator) -> None:
    forged = ((CALLER_KEY, "peloton"),)
    assert who(auth, (("username", "alice"), ("password", "a"), *forged)) == (
        "alice", "dev", "password")
    assert who(auth, forged, certificate="agent-1") == ("agent-1", "agent", "certificate")
    assert who(auth, forged) == ("", "reader", "default")  # nothing presented: the default user
    # Credentials win over a certificate, and must be the internal user's themselves.
    assert who(auth, (("username", "alice"), ("password", "a"), *forged),
               certificate="peloton") == ("alice", "dev", "password")
    with pytest.raises(Unauthenticated):  # a wrong internal password is no identity at all
        who(auth, (("username", "peloton"), ("password", "guess"), *forged))


def test_without_a_named_caller_the_peer_is_the_caller(auth: UsersAuthenticator) -> None:
    assert who(auth, INTERNAL) == ("peloton", "root", "password")
    assert who(auth, (), certificate="peloton") == ("peloton", "root", "certificate")


def test_a_named_caller_must_be_someone(auth: UsersAuthenticator) -> None:
    with pytest.raises(Unauthenticated, match="unknown user 'mallory'"):
        who(auth, (*INTERNAL, (CALLER_KEY, "mallory")))
    no_default = UsersAuthenticator(auth_config.parse(users(default=False)), TokenSigner(b"t" * 32))
    with pytest.raises(Unauthenticated, match="authentication required"):
        who(no_default, (*INTERNAL, (CALLER_KEY, "")))  # the default user, and there is none


def test_login_issues_a_token_to_whoever_proved_itself_never_to_a_named_caller(
        auth: UsersAuthenticator) -> None:
    creds = Credentials.from_metadata((*INTERNAL, (CALLER_KEY, "alice")))
    principal, token, _ = auth.login(creds)
    assert principal.name == "peloton"
    assert auth.authenticate(Credentials(token=token)).name == "peloton"


def test_authentication_off_ignores_it() -> None:
    assert OpenAuthenticator().authenticate(
        Credentials.from_metadata(((CALLER_KEY, "alice"),))).role.is_root


# -- what a relaying member sends ---------------------------------------------------------------
ALICE = Principal("alice", Role("dev"))


def test_the_member_presents_its_identity_in_place_of_the_callers_and_names_her() -> None:
    incoming = (("user-agent", "grpc-python"), ("grpc-accept-encoding", "gzip"),
                ("username", "alice"), ("password", "a"), ("authorization", "Bearer x"),
                (CALLER_KEY, "admin"), ("x-request-id", "r1"))
    assert relayed_metadata(incoming, ALICE, INTERNAL) == [
        ("x-request-id", "r1"), *INTERNAL, (CALLER_KEY, "alice")]


def test_without_an_identity_the_callers_credentials_go_on_and_she_is_named() -> None:
    # Under TLS the member's certificate may be its identity; without one, the owner
    # checks the caller's own credentials and does not believe the name.
    incoming = (("username", "alice"), ("password", "a"), (CALLER_KEY, "admin"))
    assert relayed_metadata(incoming, ALICE, ()) == [
        ("username", "alice"), ("password", "a"), (CALLER_KEY, "alice")]


def test_without_a_known_caller_nothing_is_vouched_for() -> None:
    # Authentication is off here: the peer authenticates what the caller presented; a
    # name the caller sent is dropped, and the member's identity is not lent to her.
    incoming = (("username", "alice"), ("password", "a"), (CALLER_KEY, "admin"))
    assert relayed_metadata(incoming, None, INTERNAL) == [("username", "alice"),
                                                          ("password", "a")]


def test_names_are_carried_as_ascii(auth: UsersAuthenticator) -> None:
    zoe = Principal("zoë", Role("dev"))
    sent = dict(relayed_metadata((), zoe, INTERNAL))
    assert sent[CALLER_KEY].isascii()
    assert who(auth, tuple(sent.items())) == ("zoë", "dev", "forwarded")
