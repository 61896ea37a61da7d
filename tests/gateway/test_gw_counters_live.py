"""Counters of long-lived connections are current while they stay connected (issue 28).

A ``ferry sub 'demo.>'`` left running showed ``ferry_messages_out_total{listener="nats"}``
frozen while messages were delivered to it, and the count jumped when it exited: a
subscriber's deliveries were written by the publisher's pass (``Outbox.write_now``), so
the subscriber's own writer, which folded its counts into the registry, never ran. Here
real clients stay connected while the counts are read: ``/metrics`` (HTTP listener),
``/varz`` and ``/connz`` (NATS monitoring port) must equal what the clients sent and
received, with nobody disconnected yet: core NATS over TCP and WebSocket, JetStream push
and pull deliveries, and (the audit of the other listeners found them counted per reply
or per chunk already) an HTTP server-sent-events follow as the non-NATS long-lived reader."""

from __future__ import annotations

import asyncio
import json

import httpx
import nats
import pytest
from nats.js.api import AckPolicy

from ferry_harness import running_gateway
from test_gw_metrics_listeners import scrape

pytestmark = pytest.mark.slow  # a real gateway, real clients

N = 300          # messages published while the subscriber stays connected
SUBJECTS = ("demo.a", "demo.b.c", "demo.a")   # runs of one subject and single messages


def payload(i: int) -> bytes:
    return b"m-%05d-" % i + b"x" * (i % 17)


async def live_nats(url: str, base: str, monitor: str, listener: str) -> None:
    """A wildcard subscriber and a publisher, both still connected when the counts are read."""
    sub_nc = await nats.connect(url, name="live-sub")
    pub_nc = await nats.connect(url, name="live-pub")
    try:
        sub = await sub_nc.subscribe("demo.>")
        await sub_nc.flush()
        before = await asyncio.to_thread(scrape, base)
        sent = header_bytes = 0
        for i in range(N):
            data = payload(i)
            if i % 50 == 7:   # a few with headers: their block counts in in/out bytes
                await pub_nc.publish(SUBJECTS[i % 3], data, headers={"k": "v%d" % i})
                header_bytes += len(b"NATS/1.0\r\nk: v%d\r\n\r\n" % i)   # nats-py's encoding
            else:
                await pub_nc.publish(SUBJECTS[i % 3], data)
            sent += len(data)
        await pub_nc.flush()
        got = [await sub.next_msg(timeout=10) for _ in range(N)]
        assert [m.data for m in got] == [payload(i) for i in range(N)]
        after = await asyncio.to_thread(scrape, base)
        varz, connz = await asyncio.to_thread(_monitor, monitor)
        console = await asyncio.to_thread(_console, base)
    finally:
        await pub_nc.close()
        await sub_nc.close()

    def delta(family: str) -> float:
        key = (family, listener)
        return after.get(key, 0) - before.get(key, 0)

    assert delta("ferry_messages_in_total") == N
    assert delta("ferry_messages_out_total") == N, "deliveries to a connected subscriber not counted"
    assert delta("ferry_bytes_in_total") == sent + header_bytes
    assert delta("ferry_bytes_out_total") == sent + header_bytes
    assert after[("ferry_connections_open", listener)] == 2
    # the web console's rates come from the same render: "messages/s out" moves too
    assert console[listener]["messages_out"] == after[("ferry_messages_out_total", listener)]
    assert console[listener]["bytes_out"] == after[("ferry_bytes_out_total", listener)]

    assert (varz["in_msgs"], varz["out_msgs"]) == (N, N)
    assert (varz["in_bytes"], varz["out_bytes"]) == (sent + header_bytes, sent + header_bytes)
    rows = {c.get("name"): c for c in connz["connections"]}
    assert (rows["live-pub"]["in_msgs"], rows["live-pub"]["out_msgs"]) == (N, 0)
    assert (rows["live-sub"]["in_msgs"], rows["live-sub"]["out_msgs"]) == (0, N)
    assert rows["live-sub"]["out_bytes"] == sent + header_bytes


def _console(base: str) -> dict:
    """The web console's per-listener snapshot (GET /console/api/metrics, as root)."""
    with httpx.Client(base_url=base, timeout=10) as http:
        token = http.post("/users/login", json={"username": "iggy", "password": "iggy"}).json()["access_token"]
        reply = http.get("/console/api/metrics", headers={"authorization": f"Bearer {token['token']}"})
        assert reply.status_code == 200, reply.text
        return reply.json()["listeners"]


def _monitor(monitor: str) -> tuple[dict, dict]:
    with httpx.Client(base_url=monitor, timeout=10) as mon:
        return json.loads(mon.get("/varz").text), json.loads(mon.get("/connz").text)


@pytest.mark.parametrize("listener, scheme", [("nats", "nats"), ("nats_ws", "ws")])
def test_nats_subscriber_counts_while_connected(tmp_path, listener, scheme):
    """The NATS TCP listener and the WebSocket one (the same driver and Meter)."""
    with running_gateway(tmp_path) as gw:
        asyncio.run(live_nats(gw.url(listener, scheme), f"http://127.0.0.1:{gw.ports['http']}",
                              f"http://127.0.0.1:{gw.ports['nats_monitor']}", listener))


async def live_jetstream(url: str, base: str, monitor: str) -> None:
    """JetStream deliveries to connections that stay open: a push consumer's deliver
    subject and a pull consumer's batch, both from messages a third client published."""
    setup = await nats.connect(url, name="js-setup")
    js = setup.jetstream()
    await js.add_stream(name="LIVE", subjects=["live.>"])
    await js.add_consumer("LIVE", durable_name="pushc", deliver_subject="push.inbox", ack_policy=AckPolicy.NONE)
    await js.add_consumer("LIVE", durable_name="pullc", ack_policy=AckPolicy.NONE)
    await setup.close()   # its API traffic is folded at its close, before the first reading

    push_nc = await nats.connect(url, name="js-push")
    pull_nc = await nats.connect(url, name="js-pull")
    pub_nc = await nats.connect(url, name="js-pub")
    try:
        pushed = await push_nc.subscribe("push.inbox")
        replies = await pull_nc.subscribe("pull.reply")
        await push_nc.flush()
        await pull_nc.flush()
        before = await asyncio.to_thread(scrape, base)
        varz_before, _ = await asyncio.to_thread(_monitor, monitor)
        for i in range(N):
            await pub_nc.publish("live.%d" % (i % 4), payload(i))   # plain PUBs: no PubAck
        await pub_nc.flush()
        got = [await pushed.next_msg(timeout=10) for _ in range(N)]
        assert [m.data for m in got] == [payload(i) for i in range(N)]
        request = json.dumps({"batch": N, "expires": 10 * 10**9}).encode()
        await pull_nc.publish("$JS.API.CONSUMER.MSG.NEXT.LIVE.pullc", request, reply="pull.reply")
        pulled = [await replies.next_msg(timeout=10) for _ in range(N)]
        assert [m.data for m in pulled] == [payload(i) for i in range(N)]
        after = await asyncio.to_thread(scrape, base)
        varz, connz = await asyncio.to_thread(_monitor, monitor)
    finally:
        for nc in (pub_nc, pull_nc, push_nc):
            await nc.close()

    def delta(family: str) -> float:
        return after.get((family, "nats"), 0) - before.get((family, "nats"), 0)

    assert delta("ferry_messages_in_total") == N + 1          # the publishes and the pull request
    assert delta("ferry_messages_out_total") == 2 * N         # pushed and pulled, nobody gone yet
    assert varz["in_msgs"] - varz_before["in_msgs"] == N + 1
    assert varz["out_msgs"] - varz_before["out_msgs"] == 2 * N
    assert delta("ferry_bytes_out_total") == varz["out_bytes"] - varz_before["out_bytes"]
    assert delta("ferry_bytes_in_total") == varz["in_bytes"] - varz_before["in_bytes"]
    rows = {c.get("name"): c for c in connz["connections"]}
    assert (rows["js-pub"]["in_msgs"], rows["js-pub"]["out_msgs"]) == (N, 0)
    assert (rows["js-push"]["in_msgs"], rows["js-push"]["out_msgs"]) == (0, N)
    assert (rows["js-pull"]["in_msgs"], rows["js-pull"]["out_msgs"]) == (1, N)


def test_jetstream_push_and_pull_counts_while_connected(tmp_path):
    with running_gateway(tmp_path) as gw:
        asyncio.run(live_jetstream(gw.url("nats"), f"http://127.0.0.1:{gw.ports['http']}",
                                   f"http://127.0.0.1:{gw.ports['nats_monitor']}"))


def test_http_event_stream_counts_while_connected(tmp_path):
    """The other long-lived reader Ferry has outside NATS: an HTTP server-sent-events
    follow (GET .../messages/stream) stays open; its deliveries are counted as each
    chunk is sent (adapters/http/routes_messages.py), checked here while it is open.
    The first batch is stored before the stream opens, the second arrives live."""
    with running_gateway(tmp_path) as gw:
        base = f"http://127.0.0.1:{gw.ports['http']}"
        with httpx.Client(base_url=base, timeout=10) as http:
            token = http.post("/users/login", json={"username": "iggy", "password": "iggy"}).json()["access_token"]
            http.headers["authorization"] = f"Bearer {token['token']}"
            assert http.post("/streams", json={"name": "live"}).status_code in (200, 201)
            r = http.post("/streams/live/topics", json={"name": "t", "partitions_count": 1,
                                                        "compression_algorithm": "none", "message_expiry": 0,
                                                        "max_topic_size": 0})
            assert r.status_code in (200, 201), r.text
            body = {"partitioning": {"kind": "balanced", "value": ""},
                    "messages": [{"payload": "bGl2ZS1tc2c="} for _ in range(N)]}  # "live-msg"
            before = scrape(base)
            assert http.post("/streams/live/topics/t/messages", json=body).status_code in (200, 201)
            with httpx.Client(base_url=base, timeout=10, headers=http.headers) as reader, \
                    reader.stream("GET", "/streams/live/topics/t/messages/stream",
                                  params={"consumer_id": 1, "kind": "offset", "value": 0}) as events:
                assert events.status_code == 200
                lines = events.iter_lines()
                assert _events(lines, N) == N
                assert http.post("/streams/live/topics/t/messages", json=body).status_code in (200, 201)
                assert _events(lines, N) == N
                after = scrape(base)   # the stream is still open

    def delta(family: str) -> float:
        return after.get((family, "http"), 0) - before.get((family, "http"), 0)

    assert delta("ferry_messages_in_total") == 2 * N and delta("ferry_messages_out_total") == 2 * N
    assert delta("ferry_bytes_in_total") == len(b"live-msg") * 2 * N
    assert delta("ferry_bytes_out_total") == len(b"live-msg") * 2 * N


def _events(lines, n: int) -> int:
    """Read SSE lines until ``n`` message events went by; how many did."""
    seen = 0
    for line in lines:
        seen += line == "event: message"
        if seen == n:
            break
    return seen
