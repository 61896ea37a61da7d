"""The broker's connection directory and per-listener error rings (core/connections.py), no sockets."""

from __future__ import annotations

import contextvars

from core.connections import (MAX_CLIENT_TEXT, MAX_ERROR_TEXT, ConnectionDirectory, ErrorLog, bind_connection,
                              directory_for, per_connection)
from core.metrics import MetricsRegistry, listener_metrics


class _Owner:
    """A weakly referenceable stand-in for a broker."""


def test_directory_registers_lists_and_forgets():
    d = ConnectionDirectory()
    a = d.open("nats", "127.0.0.1:5000", client="app\x00one", version="python3 2.16")
    b = d.open("http", "127.0.0.1:5001")
    assert [c.id for c in d.connections()] == [a.id, b.id] and a.id != b.id
    assert a.client == "app?one"  # control characters never reach the page
    assert a.snapshot()["closable"] is False and a.snapshot()["user"] == ""
    d.closed(a)
    d.closed(a)  # idempotent
    assert [c.id for c in d.connections()] == [b.id] and d.get(a.id) is None


def test_close_calls_the_drivers_close_once_per_request():
    d = ConnectionDirectory()
    closed = []
    c = d.open("iggy_tcp", "h:1", close=lambda: closed.append("bye"))
    assert d.close(c.id) is c and closed == ["bye"]
    assert d.close(c.id + 100) is None  # no such connection
    assert d.close(d.open("x", "h:2").id) is None  # a driver without a close
    assert closed == ["bye"]


def test_metered_counters_move_the_listener_series_and_the_connection_alike():
    reg = MetricsRegistry()
    shared = listener_metrics(reg)
    d = ConnectionDirectory()
    one, two = d.open("iggy_tcp", "h:1"), d.open("iggy_tcp", "h:2")
    c1, c2 = one.metered(shared), two.metered(shared)
    c1["messages_in"].inc("iggy_tcp", amount=3)
    c1["bytes_in"].inc("iggy_tcp", amount=30)
    c2["messages_out"].inc("iggy_tcp", amount=2)
    c2["errors"].inc("iggy_tcp")
    c1["connections_open"].inc("iggy_tcp")  # not a per-connection count: passes through
    assert (one.messages_in, one.bytes_in, one.messages_out, one.errors) == (3, 30, 0, 0)
    assert (two.messages_in, two.messages_out, two.errors) == (0, 2, 1)
    assert shared["messages_in"].value("iggy_tcp") == 3 and shared["messages_out"].value("iggy_tcp") == 2
    assert c1["connections_open"].value("iggy_tcp") == 1  # the shared gauge's own value()
    assert 'ferry_errors_total{listener="iggy_tcp"} 1' in reg.render()


def test_per_connection_counters_follow_the_bound_connection():
    shared = listener_metrics(MetricsRegistry())
    counters = per_connection(shared)
    d = ConnectionDirectory()
    a, b = d.open("http", "h:1"), d.open("http", "h:2")

    def serve(conn, n):
        bind_connection(conn)
        counters["messages_in"].inc("http", amount=n)

    contextvars.copy_context().run(serve, a, 2)
    contextvars.copy_context().run(serve, b, 5)
    counters["messages_in"].inc("http")  # no connection bound here: only the listener counts
    assert (a.messages_in, b.messages_in) == (2, 5)
    assert shared["messages_in"].value("http") == 8


def test_refresh_runs_before_each_snapshot():
    d = ConnectionDirectory()
    seen = {"n": 0}

    def refresh(conn):
        seen["n"] += 1
        conn.messages_out = seen["n"] * 10
        conn.subscriptions, conn.subjects = 2, ("a.b", "c.>")

    c = d.open("nats", "h:1", refresh=refresh)
    assert c.snapshot()["messages_out"] == 10 and c.snapshot()["messages_out"] == 20
    assert c.snapshot()["subjects"] == ["a.b", "c.>"]


def test_error_ring_keeps_the_last_n_per_listener_newest_first():
    clock = iter(range(1000))
    log = ErrorLog(limit=3, clock=lambda: next(clock))
    for i in range(5):
        log.record("nats", "h:1", f"nats error {i}")
    log.record("http", "h:2", "404 not_found")
    assert [e.message for e in log.entries("nats")] == ["nats error 4", "nats error 3", "nats error 2"]
    assert [e.listener for e in log.entries()] == ["http", "nats", "nats", "nats"]  # by time, newest first
    assert log.entries("pravega") == []


def test_error_text_is_bounded():
    log = ErrorLog()
    log.record("nats", "x" * 1000, "e" * 10_000)
    (entry,) = log.entries()
    assert len(entry.message) == MAX_ERROR_TEXT and len(entry.remote) == MAX_CLIENT_TEXT


def test_directory_error_uses_the_bound_connection_for_the_address():
    d = ConnectionDirectory()
    conn = d.open("pravega_controller", "10.0.0.1:99")

    def fail():
        bind_connection(conn)
        d.error("pravega_controller", "NOT_FOUND: no such scope")

    contextvars.copy_context().run(fail)
    conn.error("UNAUTHENTICATED")
    assert [(e.remote, e.message) for e in d.errors.entries()][::-1] == [
        ("10.0.0.1:99", "NOT_FOUND: no such scope"), ("10.0.0.1:99", "UNAUTHENTICATED")]


def test_one_directory_per_owner():
    a, b = _Owner(), _Owner()
    assert directory_for(a) is directory_for(a) and directory_for(a) is not directory_for(b)
