"""``/jsz`` on the NATS monitoring port: Ferry against the real ``nats-server -js -m``.

The same JetStream work (two streams, one of them in memory, a durable pull
consumer that fetched and acked, N publishes on each stream, one failing API
request) runs against a Ferry gateway and the real nats-server; both
monitoring ports are then read with the query options nats-server supports
and the documents compared: the same keys (less the ones Ferry leaves out,
listed below), the same counts, the same stream and consumer states. Byte
figures differ by design (Ferry's stored bytes), so for those only Ferry's
own sums are checked.
"""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import httpx
import pytest

from ferry_harness import free_port, running_gateway, wait_for_port
from test_nats_jetstream_streams import NATS_SERVER, needs_server

nats = pytest.importorskip("nats")

pytestmark = needs_server

N = 7
# Keys nats-server 2.15.1 writes that Ferry leaves out (adapters/nats/jetstream/monitor.py):
# strict JSON parsing (Ferry ignores unknown request fields), nats-server's default
# limits block (Ferry enforces none).
# config.sync_interval: under sync_always nats-server still reports its periodic interval
# (opts.go sets both); Ferry has no periodic sync to report.
LEFT_OUT = {"config.strict", "limits.default_max_consumers", "config.sync_interval"}
QUERIES = ["", "streams=true&consumers=true", "accounts=true", "streams=true&consumers=true&config=true",
           "acc=$G", "acc=nope", "acc=nope&accounts=true", "accounts=true&offset=1", "accounts=1&limit=-1",
           "consumers=1&raft=1", "leader-only=true"]
BAD_QUERIES = ["streams=bogus", "consumers=yes", "limit=x", "offset=1.5", "limit=99999999999999999999",
               "accounts=true&raft=maybe"]


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


async def work(url: str) -> None:
    """Streams, a consumer with one delivery acked and one pending, publishes."""
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        await js.add_stream(name="ORDERS", subjects=["orders.>"])
        await js.add_stream(name="EVENTS", subjects=["events.*"], storage="memory")
        await js.add_consumer("ORDERS", durable_name="proc", ack_policy="explicit")
        for i in range(N):
            await js.publish(f"orders.{i}", b"o" * 10)
            await js.publish("events.x", b"e" * 20)
        try:
            await js.stream_info("MISSING")
        except nats.js.errors.NotFoundError:
            pass
        sub = await js.pull_subscribe("orders.>", durable="proc", stream="ORDERS")
        msgs = await sub.fetch(2, timeout=5)
        await msgs[0].ack_sync()
    finally:
        await nc.close()


def fetch_all(port: int) -> dict[str, tuple[int, object]]:
    out = {}
    with httpx.Client(base_url=f"http://127.0.0.1:{port}") as http:
        for q in QUERIES + BAD_QUERIES:
            r = http.get("/jsz" + ("?" + q if q else ""))
            out[q] = (r.status_code, r.json() if r.status_code == 200 else r.text)
    return out


@pytest.fixture
def real_jsz(tmp_path):
    """Documents from the real nats-server after :func:`work`, by query."""
    port, http_port = free_port(), free_port()
    # sync_interval: always = Ferry's default durability (every ack after its fdatasync)
    conf = tmp_path / "real.conf"
    conf.write_text(f'jetstream {{ store_dir: "{tmp_path / "real"}", sync_interval: always }}\n')
    proc = subprocess.Popen([NATS_SERVER, "-c", str(conf), "-a", "127.0.0.1",
                             "-p", str(port), "-m", str(http_port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_for_port(port, timeout=10, proc=proc) and wait_for_port(http_port, timeout=10, proc=proc)
        run(work(f"nats://127.0.0.1:{port}"))
        yield fetch_all(http_port)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def paths(doc, prefix: str = "") -> set[str]:
    """Every key path of a JSON document; list items merge under ``[]``."""
    out: set[str] = set()
    if isinstance(doc, dict):
        for key, value in doc.items():
            path = f"{prefix}.{key}" if prefix else key
            out |= {path} | paths(value, path)
    elif isinstance(doc, list):
        for item in doc:
            out |= paths(item, prefix + "[]")
    return out


def streams_of(doc) -> dict[str, dict]:
    details = doc.get("account_details") or [{}]
    return {s["name"]: s for s in details[0].get("stream_detail", [])}


COUNTS = ("streams", "consumers", "messages", "accounts", "ha_assets", "total", "reserved_memory",
          "reserved_storage", "streams_leader", "consumers_leader", "disabled")
STATE = ("messages", "first_seq", "last_seq", "consumer_count")
CONSUMER = ("stream_name", "name", "num_ack_pending", "num_redelivered", "num_waiting", "num_pending")


def test_jsz_matches_nats_server(tmp_path, real_jsz):
    with running_gateway(tmp_path) as gw:
        run(work(gw.url()))
        ours = fetch_all(gw.ports["nats_monitor"])
        data_dir = str((tmp_path / "data").resolve())
    for q in QUERIES:
        (status, mine), (their_status, theirs) = ours[q], real_jsz[q]
        assert status == their_status == 200, q
        # Stream and consumer configs are STREAM.INFO's and CONSUMER.INFO's, compared with
        # nats-server's by the JetStream API tests; here only their presence is.
        def shape(doc):
            return {p for p in paths(doc) if not ("stream_detail" in p and ".config." in p)}
        assert shape(mine) == shape(theirs) - LEFT_OUT, q
        for key in COUNTS:
            assert mine.get(key) == theirs.get(key), (q, key)
        assert mine["api"]["total"] == theirs["api"]["total"] == 5, q   # 2 streams, 1 consumer, 1 info, 1 missing
        assert mine["api"]["errors"] == theirs["api"]["errors"] == 1, q
        assert mine["messages"] == 2 * N and mine["streams"] == 2 and mine["consumers"] == 1
        # Ferry's byte figures are its own stored bytes: check they add up
        assert mine["memory"] > 0 and mine["storage"] > 0 and mine["bytes"] == mine["memory"] + mine["storage"]
        assert mine["config"]["store_dir"] == data_dir and mine["config"]["max_storage"] == -1
        for mine_acc, their_acc in zip(mine.get("account_details", []), theirs.get("account_details", [])):
            assert (mine_acc["name"], mine_acc["id"]) == (their_acc["name"], their_acc["id"]) == ("$G", "$G")
            assert mine_acc["api"] == their_acc["api"] and mine_acc["reserved_memory"] == their_acc["reserved_memory"]
        assert len(mine.get("account_details", [])) == len(theirs.get("account_details", [])), q
        ms, ts = streams_of(mine), streams_of(theirs)
        assert sorted(ms) == sorted(ts), q
        for name, detail in ms.items():
            other = ts[name]
            assert {k: detail["state"][k] for k in STATE} == {k: other["state"][k] for k in STATE}, (q, name)
            assert detail["cluster"] == {"leader": mine["server_id"]}
            if "config" in detail:
                assert detail["config"]["name"] == other["config"]["name"] == name
                assert detail["config"]["storage"] == other["config"]["storage"]
            mine_cons = {c["name"]: c for c in detail.get("consumer_detail", [])}
            their_cons = {c["name"]: c for c in other.get("consumer_detail", [])}
            assert sorted(mine_cons) == sorted(their_cons), (q, name)
            for cname, con in mine_cons.items():
                peer = their_cons[cname]
                assert {k: con[k] for k in CONSUMER} == {k: peer[k] for k in CONSUMER}, (q, cname)
                for seqs in ("delivered", "ack_floor"):
                    assert (con[seqs]["consumer_seq"], con[seqs]["stream_seq"]) == \
                        (peer[seqs]["consumer_seq"], peer[seqs]["stream_seq"]), (q, cname, seqs)
                assert ("config" in con) == ("config" in peer)
        if ms:
            assert ms["ORDERS"]["state"]["bytes"] + ms["EVENTS"]["state"]["bytes"] == mine["bytes"]
            assert ms["EVENTS"]["state"]["bytes"] == mine["memory"]
            assert ms["ORDERS"]["state"]["consumer_count"] == 1 and ms["ORDERS"]["state"]["messages"] == N
    for q in BAD_QUERIES:
        assert ours[q] == real_jsz[q], q
        assert ours[q][0] == 400


def test_jsz_without_jetstream_says_disabled(tmp_path):
    port, http_port = free_port(), free_port()
    proc = subprocess.Popen([NATS_SERVER, "-a", "127.0.0.1", "-p", str(port), "-m", str(http_port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_for_port(http_port, timeout=10, proc=proc)
        theirs = httpx.get(f"http://127.0.0.1:{http_port}/jsz?accounts=true").json()
        their_ldm = httpx.get(f"http://127.0.0.1:{http_port}/jsz?leader-only=true")
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    with running_gateway(tmp_path, FERRY_NATS_JETSTREAM="false") as gw:
        base = f"http://127.0.0.1:{gw.ports['nats_monitor']}"
        mine = httpx.get(base + "/jsz?accounts=true").json()
        my_ldm = httpx.get(base + "/jsz?leader-only=true")
    volatile = ("server_id", "now")
    assert {k: v for k, v in mine.items() if k not in volatile} == \
        {k: v for k, v in theirs.items() if k not in volatile}
    assert mine["disabled"] is True and list(mine) == list(theirs)
    assert (my_ldm.status_code, my_ldm.text) == (their_ldm.status_code, their_ldm.text)


def test_jsz_is_listed_and_counts_a_fresh_gateway(tmp_path):
    with running_gateway(tmp_path) as gw:
        base = f"http://127.0.0.1:{gw.ports['nats_monitor']}"
        assert "/jsz" in httpx.get(base + "/").json()["endpoints"]
        doc = httpx.get(base + "/jsz?streams=true").json()
    assert (doc["streams"], doc["consumers"], doc["messages"], doc["bytes"]) == (0, 0, 0, 0)
    assert doc["account_details"][0]["name"] == "$G" and "stream_detail" not in doc["account_details"][0]
    assert doc["config"]["store_dir"] == str(Path(tmp_path / "data").resolve())
    # the default group commit acks after fdatasync, as nats-server's sync_always
    assert doc["config"]["sync_always"] is True and "sync_interval" not in doc["config"] and "disabled" not in doc
