"""Long poll (wait_ms), /metrics and /healthz."""

from __future__ import annotations

import pytest
import trio

from http_helpers import TEST_LIMIT_S, b64, client, gateway, login, make_topic

M = "/streams/s1/topics/t1/messages"


@pytest.mark.parametrize("http2", [False, True], ids=["h1", "h2"])
async def test_long_poll_wakes_on_append(tmp_path, http2):
    with trio.fail_after(TEST_LIMIT_S):
        async with gateway(tmp_path) as port, client(port, http2=http2) as c, client(port) as producer:
            await login(c)
            await login(producer)
            await make_topic(c)
            got = {}

            async def poll():
                r = await c.get(M, params={"kind": "offset", "value": 0, "count": 5, "wait_ms": 20_000})
                got["r"] = r

            async with trio.open_nursery() as nursery:
                nursery.start_soon(poll)
                await trio.sleep(0.2)  # let the poll park (not a timing assertion: order only)
                assert "r" not in got
                r = await producer.post(M, json={"messages": [{"payload": b64("wake")}]})
                assert r.status_code == 201
            assert [m["payload"] for m in got["r"].json()["messages"]] == [b64("wake")]


async def test_long_poll_times_out_empty(tmp_path):
    with trio.fail_after(TEST_LIMIT_S):
        async with gateway(tmp_path) as port, client(port) as c:
            await login(c)
            await make_topic(c)
            r = await c.get(M, params={"count": 5, "wait_ms": 50})
            assert r.status_code == 200 and r.json()["messages"] == []


async def test_h2_streams_are_independent_of_a_parked_poll(tmp_path):
    with trio.fail_after(TEST_LIMIT_S):
        async with gateway(tmp_path) as port, client(port, http2=True) as c:
            await login(c)
            await make_topic(c)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(c.get, M, )  # no wait: returns at once
                nursery.start_soon(lambda: c.get(M, params={"wait_ms": 20_000}))
                await trio.sleep(0.1)
                # the same connection keeps answering while one stream is parked
                assert (await c.get("/ping")).status_code == 200
                assert (await c.post(M, json={"messages": [{"payload": "eA=="}]})).status_code == 201


async def test_metrics_and_healthz(tmp_path):
    with trio.fail_after(TEST_LIMIT_S):
        async with gateway(tmp_path) as port, client(port) as c:
            await login(c)
            await make_topic(c)
            await c.post(M, json={"messages": [{"payload": b64("abc")}, {"payload": b64("de")}]})
            await c.get(M, params={"count": 10})
            assert (await c.get("/healthz")).json() == {"status": "ok"}
            r = await c.get("/metrics")
            assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
            text = r.text
            assert 'ferry_messages_in_total{listener="http"} 2' in text
            assert 'ferry_bytes_in_total{listener="http"} 5' in text
            assert 'ferry_messages_out_total{listener="http"} 2' in text
            assert 'ferry_connections_open{listener="http"} 1' in text
            assert 'ferry_partition_next_offset{stream="s1",topic="t1",partition="0"} 2' in text
            assert 'ferry_http_requests_total{listener="http",status="201"} 1' in text
            assert "# TYPE ferry_connections_total counter" in text
            assert 'ferry_http_request_duration_seconds_count{listener="http"}' in text


async def test_fsync_latency_histogram(tmp_path):
    with trio.fail_after(TEST_LIMIT_S):
        async with gateway(tmp_path, FERRY_LOG_FSYNC="always") as port, client(port) as c:
            await login(c)
            await make_topic(c)
            assert (await c.post(M, json={"messages": [{"payload": b64("durable")}]})).status_code == 201
            text = (await c.get("/metrics")).text
            assert "# TYPE ferry_fsync_duration_seconds histogram" in text
            count = next(line for line in text.splitlines() if line.startswith("ferry_fsync_duration_seconds_count"))
            assert int(count.split()[-1]) >= 1  # the send's batch was fsynced before the 201


async def _next_event(lines) -> dict:
    """The next SSE event (id, event, data) from an aiter_lines() iterator."""
    event = {}
    async for line in lines:
        if not line:
            if event:
                return event
            continue
        if line.startswith(":"):
            continue  # keep-alive comment
        key, _, value = line.partition(": ")
        event[key] = value
    raise AssertionError("stream ended")


@pytest.mark.parametrize("http2", [False, True], ids=["h1", "h2"])
async def test_server_sent_events_follow_a_partition(tmp_path, http2):
    import json

    with trio.fail_after(TEST_LIMIT_S):
        async with gateway(tmp_path) as port, client(port, http2=http2) as c, client(port) as producer:
            await login(c)
            await login(producer)
            await make_topic(c)
            await producer.post(M, json={"messages": [{"payload": b64("old-0")}, {"payload": b64("old-1")}]})
            async with c.stream("GET", M + "/stream", params={"kind": "first"}) as r:
                assert r.status_code == 200 and r.headers["content-type"] == "text/event-stream"
                lines = r.aiter_lines()
                first = await _next_event(lines)
                assert (first["id"], first["event"]) == ("0", "message")
                assert json.loads(first["data"])["payload"] == b64("old-0")
                assert (await _next_event(lines))["id"] == "1"
                # live: appended after the stream caught up
                await producer.post(M, json={"messages": [{"payload": b64("live")}]})
                live = await _next_event(lines)
                assert live["id"] == "2" and json.loads(live["data"])["payload"] == b64("live")
            # a reconnecting EventSource resumes after Last-Event-ID
            async with c.stream("GET", M + "/stream", headers={"last-event-id": "1"}) as r:
                assert (await _next_event(r.aiter_lines()))["id"] == "2"
            assert (await c.get("/ping")).status_code == 200  # the connection lives on (h2) / a new one (h1)
            r = await c.head(M + "/stream")
            assert r.status_code == 200 and r.headers["content-type"] == "text/event-stream" and r.content == b""
