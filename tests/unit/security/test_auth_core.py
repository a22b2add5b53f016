"""The auth core: password hashes, rules and roles, the users file, tokens, the authenticator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from peloton.common.auth import build_security, check_bind, is_loopback, passwords
from peloton.common.auth import config as auth_config
from peloton.common.auth.authenticator import Credentials, OpenAuthenticator, UsersAuthenticator
from peloton.common.auth.policy import Principal, Role, Rule
from peloton.common.auth.tokens import TokenSigner
from peloton.common.clock import FakeClock
from peloton.core.errors import FailedPrecondition, InvalidArgument, Unauthenticated

FAST = 10  # log2 N for test hashes (the format and code path are the production ones)


# -- passwords ------------------------------------------------------------------------------------
def test_hashes_are_salted_slow_and_checked_in_constant_time() -> None:
    a, b = passwords.hash_password("pw", log_n=FAST), passwords.hash_password("pw", log_n=FAST)
    assert a != b and a.startswith("scrypt$10$8$1$")  # a fresh salt each time
    assert passwords.verify_password("pw", a) and not passwords.verify_password("pW", a)
    assert passwords.parse_hash(passwords.hash_password("x"))[0] == passwords.LOG_N


@pytest.mark.parametrize("bad", ["", "sha256$abc", "scrypt$14$8$1$!!$!!", "scrypt$4$8$1$AAAAAAAAAAA=$"
                                 "AAAAAAAAAAAAAAAAAAAAAA==", "scrypt$30$8$1$AAAAAAAAAAA=$AAAA"])
def test_malformed_or_weak_hashes_are_refused(bad: str) -> None:
    with pytest.raises(passwords.BadHash):
        passwords.parse_hash(bad)


def test_the_cache_skips_scrypt_for_a_repeated_success_only(monkeypatch: pytest.MonkeyPatch) -> None:
    stored = passwords.hash_password("pw", log_n=FAST)
    calls: list[str] = []
    real = passwords.verify_password

    def counted(p: str, s: str) -> bool:
        calls.append(p)
        return real(p, s)

    monkeypatch.setattr(passwords, "verify_password", counted)
    clock = FakeClock()
    cache = passwords.VerifiedCache(ttl=60, clock=clock)
    assert cache.check("u", "pw", stored) and cache.check("u", "pw", stored)
    assert not cache.check("u", "wrong", stored) and not cache.check("u", "wrong", stored)
    assert calls == ["pw", "wrong", "wrong"]  # failures are never cached
    clock.advance(61)  # a success is remembered for the cache's ttl only
    assert cache.check("u", "pw", stored) and calls == ["pw", "wrong", "wrong", "pw"]


# -- rules and roles ------------------------------------------------------------------------------
@pytest.mark.parametrize("text", ["*", "peloton.api.v1alpha.job.stateless.svc.JobService:Get*",
                                  "peloton.api.v0.job.JobManager:*", "a.B:Method",
                                  "thrift.AuroraSchedulerManager:createJob:www",
                                  "thrift.AuroraSchedulerManager:*:www:devel:hello"])
def test_rules_in_pelotons_grammar_and_auroras_are_accepted(text: str) -> None:
    assert str(Rule.parse(text)) == text


@pytest.mark.parametrize("text", ["", "svc", "svc:", ":m", "svc:m*x", "svc:m:*:*:*:*", "s-v:m",
                                  "svc:m1", "svc:**"])
def test_malformed_rules_are_refused_naming_the_field(text: str) -> None:
    with pytest.raises(InvalidArgument) as exc:
        Rule.parse(text, "roles[x].accept")
    assert exc.value.field == "roles[x].accept"


def test_matching_follows_peloton_and_shiro() -> None:
    get = Rule.parse("svc.A:Get*")
    assert get.matches(("svc.A", "GetJob")) and not get.matches(("svc.A", "CreateJob"))
    assert not get.matches(("svc.B", "GetJob"))
    aurora = Rule.parse("thrift.AuroraSchedulerManager:*:www")
    assert aurora.matches(("thrift.AuroraSchedulerManager", "createJob", "www", "prod", "web"))
    assert not aurora.matches(("thrift.AuroraSchedulerManager", "createJob", "bob", "prod", "web"))
    assert not Rule.parse("thrift.AuroraAdmin:drainHosts:x").matches(("thrift.AuroraAdmin",
                                                                         "drainHosts"))


rule_texts = st.sampled_from(["*", "s.A:*", "s.A:Get*", "s.A:GetJob", "s.B:*", "s.A:Create*"])


@given(accept=st.lists(rule_texts, max_size=4), reject=st.lists(rule_texts, max_size=4),
       method=st.sampled_from(["GetJob", "CreateJob", "Stop"]), service=st.sampled_from(["s.A", "s.B"]))
def test_a_reject_rule_always_wins(accept: list[str], reject: list[str], method: str,
                                   service: str) -> None:
    role = Role("r", tuple(map(Rule.parse, accept)), tuple(map(Rule.parse, reject)))
    perm = (service, method)
    expected = (any(Rule.parse(r).matches(perm) for r in accept)
                and not any(Rule.parse(r).matches(perm) for r in reject))
    assert role.permits(perm) is expected


def test_scopes_of_a_role() -> None:
    dev = Role("dev", (Rule.parse("*"),), (Rule.parse("s.A:Delete*"),), pools=("/team/*", "/dev"),
               owners=("self", "ci-*"), task_users=("alice",))
    alice = Principal("alice", dev)
    assert alice.may_use_pool("/team/a") and alice.may_use_pool("/dev") and alice.may_use_pool("/team")
    assert not alice.may_use_pool("/prod") and not alice.may_use_pool("/devx")
    assert alice.may_change_job_of("alice") and alice.may_change_job_of("ci-nightly")
    assert not alice.may_change_job_of("bob") and not alice.may_change_job_of("")
    assert alice.may_run_as("") and alice.may_run_as("alice") and not alice.may_run_as("root")
    root = Principal("admin", Role("root", (Rule.parse("*"),)))
    assert root.role.is_root and root.may_use_pool("/prod") and root.may_run_as("root")
    assert not dev.is_root


# -- the users file -------------------------------------------------------------------------------
def users_file(**changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "users": [{"role": "reader"},
                  {"username": "alice", "role": "dev",
                   "password_hash": passwords.hash_password("a", log_n=FAST)},
                  {"username": "peloton", "role": "root",
                   "password_hash": passwords.hash_password("internal", log_n=FAST)},
                  {"username": "agent-1", "role": "agent", "certificate": True}],
        "roles": [{"role": "reader", "accept": ["s.A:Get*"]},
                  {"role": "dev", "accept": ["s.A:*"], "pools": ["/dev"]},
                  {"role": "root", "accept": ["*"]},
                  {"role": "agent", "accept": ["pelotonpy.internal.agent.AgentRegistry:*"]}],
        "internal_user": "peloton",
    }
    doc.update(changes)
    return doc


def test_the_users_file_parses() -> None:
    conf = auth_config.parse(users_file())
    assert conf.user("") is not None and conf.user("alice") is not None
    assert conf.roles["dev"].pools == ("/dev",) and conf.roles["dev"].owners == ("self",)


@pytest.mark.parametrize("change, message", [
    ({"users": [{"username": "a", "password": "clear", "role": "root"}]}, "not stored in clear"),
    ({"users": [{"username": "a", "role": "nope", "password_hash": "x"}]}, "undefined role"),
    ({"users": [{"role": "root"}, {"role": "root"}]}, "more than one default user"),
    ({"users": [{"username": "a", "role": "root"}]}, "no password_hash"),
    ({"users": [{"username": "a", "role": "root", "password_hash": "sha256$x"}]}, "password_hash"),
    ({"roles": [{"role": "r"}, {"role": "r"}]}, "more than once"),
    ({"internal_user": "alice"}, r"must accept \* and reject no method"),
    ({"internal_user": "ghost"}, "undefined internal user"),
    ({"extra": 1}, "unknown config key extra"),
    # The strict reader (issue 23): wrong types and unknown keys name the key and the value.
    ({"users": [{"username": "agent-1", "role": "root", "certificate": "false"}]},
     r"users\[0\]\.certificate: expected true or false, got 'false'"),
    ({"token_ttl_secs": 0}, "token_ttl_secs must be more than 0"),
    ({"token_ttl_secs": "abc"}, r"token_ttl_secs: expected a number, got 'abc'"),
    ({"users": [{"role": "root", "nickname": "x"}]}, r"unknown config key users\[0\]\.nickname"),
    ({"roles": [{"role": "r", "accept": {"a": 1}}]}, r"roles\[0\]\.accept: expected a list"),
])
def test_bad_users_files_are_refused_naming_the_entry(change: dict[str, Any], message: str) -> None:
    doc = users_file(**change)
    if "users" in change and "roles" not in change:
        doc["internal_user"] = ""
    with pytest.raises(InvalidArgument, match=message):
        auth_config.parse(doc)


# -- tokens ---------------------------------------------------------------------------------------
def test_tokens_are_signed_and_expire() -> None:
    clock = FakeClock()
    signer = TokenSigner(b"k" * 32, ttl_secs=60, clock=clock)
    token = signer.issue("alice")
    assert signer.verify(token).user == "alice"
    with pytest.raises(Unauthenticated, match="invalid token"):
        TokenSigner(b"j" * 32, clock=clock).verify(token)
    head, payload, sig = token.split(".")
    with pytest.raises(Unauthenticated):
        signer.verify(f"{head}.{payload[:-1]}A.{sig}")
    clock.advance(61)
    with pytest.raises(Unauthenticated, match="expired"):
        signer.verify(token)


# -- the authenticator ----------------------------------------------------------------------------
@pytest.fixture
def authenticator() -> UsersAuthenticator:
    return UsersAuthenticator(auth_config.parse(users_file()), TokenSigner(b"t" * 32))


def test_credentials_become_principals(authenticator: UsersAuthenticator) -> None:
    assert authenticator.authenticate(Credentials()).method == "default"
    alice = authenticator.authenticate(Credentials("alice", "a"))
    assert (alice.name, alice.role.name, alice.method) == ("alice", "dev", "password")
    assert authenticator.authenticate(Credentials("peloton", "internal")).internal
    agent = authenticator.authenticate(Credentials(certificate_name="agent-1"))
    assert (agent.name, agent.method) == ("agent-1", "certificate")
    _, token, _ = authenticator.login(Credentials("alice", "a"))
    assert authenticator.authenticate(Credentials(token=token)).method == "token"
    basic = Credentials().with_authorization("Basic YWxpY2U6YQ==")  # alice:a
    assert authenticator.authenticate(basic).name == "alice"


@pytest.mark.parametrize("creds", [Credentials("alice", "b"), Credentials("nobody", "a"),
                                   Credentials("alice", ""), Credentials("", "a")])
def test_every_wrong_combination_reads_the_same(authenticator: UsersAuthenticator,
                                                creds: Credentials) -> None:
    with pytest.raises(Unauthenticated, match=r"^invalid username/password combination$"):
        authenticator.authenticate(creds)


def test_without_a_default_user_credentials_are_required() -> None:
    doc = users_file()
    doc["users"] = doc["users"][1:]
    auth = UsersAuthenticator(auth_config.parse(doc), TokenSigner(b"t" * 32))
    with pytest.raises(Unauthenticated, match="authentication required"):
        auth.authenticate(Credentials())
    with pytest.raises(Unauthenticated):
        auth.login(Credentials())


def test_open_mode_lets_everyone_in_and_has_no_login() -> None:
    assert OpenAuthenticator().authenticate(Credentials()).role.is_root
    with pytest.raises(FailedPrecondition):
        OpenAuthenticator().login(Credentials("a", "b"))


def test_build_security_reads_the_internal_password_and_makes_keys(tmp_path: Path) -> None:
    secret = tmp_path / "internal.secret"
    secret.write_text("internal\n")
    secret.chmod(0o600)
    doc = users_file(internal_password_file=str(secret), audit_log="audit.log")
    path = tmp_path / "users.yaml"
    path.write_text(yaml.safe_dump(doc))
    security = build_security(path, data_dir=tmp_path / "data")
    assert security.enabled and dict(security.internal) == {"username": "peloton",
                                                            "password": "internal"}
    assert (tmp_path / "data" / "token.key").stat().st_mode & 0o077 == 0
    security.audit.record(who="a", how="p", front="grpc", what="x", result="OK")
    assert (tmp_path / "audit.log").read_text().count('"who":"a"') == 1
    secret.chmod(0o644)
    with pytest.raises(InvalidArgument, match="chmod 600"):
        build_security(path, data_dir=tmp_path / "data")


def test_embedded_mode_makes_a_process_local_internal_user(tmp_path: Path) -> None:
    doc = users_file()
    del doc["internal_user"]
    path = tmp_path / "users.yaml"
    path.write_text(yaml.safe_dump(doc))
    security = build_security(path, data_dir=tmp_path, embedded=True)
    creds = dict(security.internal)
    principal = security.authenticator.authenticate(Credentials(creds["username"], creds["password"]))
    assert principal.internal and principal.role.is_root


def test_binding_other_machines_needs_auth_or_insecure() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1")
    assert not is_loopback("0.0.0.0")
    from peloton.common.auth import Security

    check_bind("127.0.0.1", Security(), insecure=False, what="x")
    check_bind("0.0.0.0", Security(), insecure=True, what="x")
    with pytest.raises(InvalidArgument, match="--insecure"):
        check_bind("0.0.0.0", Security(), insecure=False, what="x")


def test_the_example_users_file_is_valid() -> None:
    repo = Path(__file__).resolve().parents[3]
    conf = auth_config.load(repo / "docs" / "config" / "users.example.yaml")
    assert conf.internal_user == "peloton" and conf.user("") is not None
    assert not conf.roles["admin"].is_root and conf.roles["root"].is_root
    # Our extension services are in the roles too: the web UI's overview reads pool status,
    # `peloton host capacity` host capacity, and developers schedule cron jobs.
    reader, dev = conf.roles["reader"], conf.roles["dev"]
    for role, service, method, allowed in (
            (reader, "pelotonpy.ext.capacity.PoolStatusService", "ListPoolStatus", True),
            (reader, "pelotonpy.ext.capacity.HostCapacityService", "ListHostCapacity", True),
            (reader, "pelotonpy.api.cron.CronService", "ListCronJobs", True),
            (reader, "pelotonpy.api.cron.CronService", "ScheduleCronJob", False),
            (dev, "pelotonpy.api.cron.CronService", "ScheduleCronJob", True),
            (dev, "pelotonpy.ext.capacity.PoolStatusService", "ListPoolStatus", True)):
        assert any(r.matches((service, method)) for r in role.accept) is allowed, (role.name,
                                                                                  method)
