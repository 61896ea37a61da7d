"""core/access.py: the login guard (per-address back-off, bounded) and the audit log."""

from __future__ import annotations

import logging

import pytest

from core.access import (
    FIRST_DELAY_S, FREE_FAILURES, MAX_DELAY_S, Actor, LoginGuard, audit, bind_actor, current_actor, host_of,
)
from core.errors import InvalidCredentials, LoginThrottled
from core.metadata import Metadata


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_free_failures_cost_nothing_then_the_window_doubles_to_its_cap():
    clock = Clock()
    guard = LoginGuard(clock)
    delays = [guard.failed("10.0.0.1") for _ in range(FREE_FAILURES + 8)]
    assert delays[:FREE_FAILURES] == [0.0] * FREE_FAILURES
    assert delays[FREE_FAILURES:FREE_FAILURES + 3] == [FIRST_DELAY_S, 2 * FIRST_DELAY_S, 4 * FIRST_DELAY_S]
    assert delays[-1] == MAX_DELAY_S
    assert guard.retry_after("10.0.0.1") == pytest.approx(MAX_DELAY_S)
    assert guard.retry_after("10.0.0.2") == 0.0          # another address is never affected
    clock.now += MAX_DELAY_S
    assert guard.retry_after("10.0.0.1") == 0.0          # the window passed: one more real try
    guard.succeeded("10.0.0.1")
    assert guard.failed("10.0.0.1") == 0.0               # a success forgets the failures


def test_a_quiet_address_starts_afresh_and_local_callers_are_never_counted():
    clock = Clock()
    guard = LoginGuard(clock)
    for _ in range(FREE_FAILURES + 2):
        guard.failed("10.0.0.1")
    clock.now += 3600
    assert guard.retry_after("10.0.0.1") == 0.0 and guard.failed("10.0.0.1") == 0.0
    assert guard.failed("local") == 0.0 and len(guard) == 1


def test_the_table_is_bounded_whatever_a_flood_of_addresses_does():
    guard = LoginGuard(Clock(), max_addresses=1000)
    for i in range(50_000):
        guard.failed(f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}")
    assert len(guard) == 1000


def test_host_of_takes_the_ip_from_every_address_form():
    assert host_of(("1.2.3.4", 5)) == "1.2.3.4"
    assert host_of("1.2.3.4:5") == "1.2.3.4"
    assert host_of("[::1]:5") == "::1"
    assert host_of("::1") == "::1"
    assert host_of("") == "local"


def _records(caplog):
    return [r for r in caplog.records if r.name == "ferry.audit"]


def test_the_user_store_slows_one_address_and_audits_every_failure(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="ferry.audit")
    meta = Metadata(tmp_path / "meta.db")
    try:
        meta.users.ensure_root("iggy", "iggy")
        bind_actor("nats", "10.9.9.9:1234")
        checks = 0
        real = meta.users._check_password

        def counting(*args):
            nonlocal checks
            checks += 1
            return real(*args)

        meta.users._check_password = counting
        refused = 0
        for _ in range(200):
            try:
                meta.users.authenticate("iggy", "wrong")
            except LoginThrottled:
                refused += 1
            except InvalidCredentials:
                pass
        # Only the free failures and the one that opened the window reached argon2.
        assert checks == FREE_FAILURES + 1 and refused == 200 - FREE_FAILURES - 1
        with pytest.raises(LoginThrottled):
            meta.users.authenticate("iggy", "iggy")                  # even the right password waits
        bind_actor("nats", "10.9.9.10:1")                       # another address: at once
        assert meta.users.authenticate("iggy", "iggy").is_root
        failed = [r for r in _records(caplog) if r.outcome == "failed"]
        throttled = [r for r in _records(caplog) if r.outcome == "throttled"]
        assert len(failed) == FREE_FAILURES + 1 and len(throttled) == 200 - FREE_FAILURES
        assert {(r.protocol, r.addr, r.target) for r in failed} == {("nats", "10.9.9.9", "iggy")}
        assert all("wrong" not in r.getMessage() + str(vars(r)) for r in _records(caplog))  # no secrets
    finally:
        meta.close()
        bind_actor("local")


def test_changes_are_audited_with_their_actor(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="ferry.audit")
    meta = Metadata(tmp_path / "meta.db")
    try:
        meta.users.ensure_root("iggy", "iggy")
        actor = bind_actor("http", "192.0.2.7:443")
        actor.logged_in("iggy", 0)
        caplog.clear()
        meta.create_stream("orders")
        meta.create_topic("orders", "eu")
        alice = meta.users.create_user("alice", "secret1")
        meta.users.create_pat(alice.id, "ci-token")
        meta.delete_topic("orders", "eu")
        meta.users.delete_user("alice")
        events = [(r.event, r.protocol, r.addr, r.user) for r in _records(caplog)]
        assert [e[0] for e in events] == ["stream.create", "topic.create", "user.create", "token.create",
                                         "topic.delete", "user.delete"]
        assert {e[1:] for e in events} == {("http", "192.0.2.7", "iggy")}
    finally:
        meta.close()
        bind_actor("local")


def test_audit_names_the_current_actor_or_local(caplog):
    caplog.set_level(logging.INFO, logger="ferry.audit")
    bind_actor("local")
    audit("stream.create", stream="x")
    audit("denied", "denied", actor=Actor("iggy", "10.0.0.1", "bob", 3), action="send_messages")
    first, second = _records(caplog)
    assert (first.protocol, first.addr, first.user, first.stream) == ("local", "local", "-", "x")
    assert (second.levelno, second.user, second.action) == (logging.WARNING, "bob", "send_messages")
    assert current_actor().protocol == "local"
