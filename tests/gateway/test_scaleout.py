"""Scale-out: two Ferry gateways over a real 3-node nats-server JetStream cluster
(docs/scale-out.md), with the real clients: apache-iggy 0.9.0, nats-py, httpx.

Each test gets its own store prefix on one cluster shared by the module, so they
do not see each other's streams; gateways get their own data directories (their
caches). Clients talk to gateway A and gateway B and must agree.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import subprocess
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
import nats
import pytest

from ferry_harness import running_gateway
from iggy_clients import client_python
from nats_cluster import NatsCluster, find_nats_server
from nats_cluster_fixtures import SKIP_REASON

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
IGGY = ROOT / "tests" / "iggy" / "clients" / "current_scaleout.py"
WAIT = 30  # guards a hang only
_prefixes = itertools.count()


def iggy(gw, mode: str, *args) -> list[dict]:
    proc = subprocess.run([str(client_python("apache-iggy==0.9.0")), str(IGGY), str(gw.ports["iggy_tcp"]), mode,
                           *map(str, args)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


@contextmanager
def gateways(tmp_path: Path, cluster, n: int = 2, toml: str = "", tag: str = ""):
    prefix = f"T{next(_prefixes)}{tag}"
    with ExitStack() as stack:
        gws = []
        for name in "ab"[:n]:
            (tmp_path / name).mkdir(exist_ok=True)
            gws.append(stack.enter_context(running_gateway(
                tmp_path / name, toml, FERRY_STORE_URL=cluster.url, FERRY_STORE_PREFIX=prefix)))
        yield gws


@contextmanager
def http(gw):
    with httpx.Client(base_url=f"http://127.0.0.1:{gw.ports['http']}", timeout=WAIT) as c:
        r = c.post("/users/login", json={"username": "iggy", "password": "iggy"})
        c.headers["authorization"] = f"Bearer {r.json()['access_token']['token']}"
        yield c


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One real 3-node JetStream cluster for the module (tests/support/nats_cluster.py)."""
    if find_nats_server() is None:
        pytest.skip(SKIP_REASON)
    with NatsCluster(tmp_path_factory.mktemp("nats-cluster")) as c:
        yield c


def http_headers(msg) -> dict:
    return {base64.b64decode(e["key"]["value"]).decode(): e["value"] for e in msg["user_headers"]}


def test_a_message_sent_through_one_gateway_is_read_through_the_other(tmp_path, cluster):
    with gateways(tmp_path, cluster) as (a, b), http(a) as ha, http(b) as hb:
        assert iggy(a, "setup") == [{"setup": True}]
        # metadata made on A is on B (the metadata log)
        assert [s["name"] for s in hb.get("/streams").json()] == ["orders"]
        assert iggy(a, "send", 5, 0) == [{"sent": 5}]
        got = iggy(b, "poll", 3)
        assert [(m["offset"], m["payload"], m["headers"]) for m in got] == [
            (i, f"m{i}", {"trace": "abc", "n": i}) for i in range(3)]
        # the consumer offset B stored is A's too: A goes on from offset 3
        assert [m["offset"] for m in iggy(a, "poll", 10)] == [3, 4]

        async def nats_steps():
            na, nb = await nats.connect(a.url()), await nats.connect(b.url())
            sub = await nb.subscribe("orders.eu.>")
            await nb.flush()
            ack = await na.request("orders.eu.x", b"from-nats", headers={"trace": "xyz"}, timeout=WAIT)
            msg = await sub.next_msg(WAIT)
            await na.close()
            await nb.close()
            return json.loads(ack.data), msg

        ack, msg = asyncio.run(nats_steps())
        assert (msg.subject, msg.data, msg.headers) == ("orders.eu.x", b"from-nats", {"trace": "xyz"})
        assert ack["offset"] == 5 and ack["partition"] == 0
        # HTTP on B reads what Iggy and NATS sent through A, headers included
        r = hb.get("/streams/orders/topics/eu/messages", params={"kind": "offset", "value": 0, "count": 10,
                                                                   "partition_id": 0})
        msgs = r.json()["messages"]
        assert [base64.b64decode(m["payload"]) for m in msgs] == [b"m0", b"m1", b"m2", b"m3", b"m4", b"from-nats"]
        assert http_headers(msgs[5])["trace"] == {"kind": "string", "value": base64.b64encode(b"xyz").decode()}
        # and an HTTP send through B is polled through A by Iggy
        r = hb.post("/streams/orders/topics/eu/messages", json={
            "partitioning": {"kind": "partition_id", "value": base64.b64encode((0).to_bytes(4, "little")).decode()},
            "messages": [{"payload": base64.b64encode(b"from-http").decode()}]})
        assert r.status_code == 201, r.text
        assert [m["payload"] for m in iggy(a, "poll", 10)] == ["from-nats", "from-http"]
        assert ha.get("/streams/orders/topics/eu").json()["messages_count"] == 7


def test_restarting_everything_keeps_messages_and_offsets(tmp_path, cluster):
    with gateways(tmp_path, cluster, tag="r") as (a, b):
        prefix = a.cfg.store.prefix
        iggy(a, "setup")
        iggy(a, "send", 4, 0)
        assert [m["offset"] for m in iggy(b, "poll", 2)] == [0, 1]
    cluster.restart_all(hard=True)
    # new gateways with empty data directories: stateless, everything comes from the cluster
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    with running_gateway(fresh, FERRY_STORE_URL=cluster.url, FERRY_STORE_PREFIX=prefix) as c:
        assert [(m["offset"], m["payload"]) for m in iggy(c, "poll", 10)] == [(2, "m2"), (3, "m3")]


def test_core_nats_crosses_gateways(tmp_path, cluster):
    """Plain (not stored) NATS: a subscriber on B gets A's publishes, headers and all,
    and a request on A is answered by a responder on B (the reply crosses back)."""
    with gateways(tmp_path, cluster, tag="n") as (a, b):
        async def main():
            na, nb = await nats.connect(a.url()), await nats.connect(b.url())
            sub = await nb.subscribe("news.>")

            async def echo(msg):
                await msg.respond(b"echo:" + msg.data)

            await nb.subscribe("svc.echo", cb=echo)
            await nb.flush()
            await asyncio.sleep(0.2)  # B's interest reaches the cluster (a SUB, then a PING)
            await na.publish("news.eu", b"hello", headers={"k": "v"})
            got = await sub.next_msg(WAIT)
            reply = await na.request("svc.echo", b"ping", timeout=WAIT)
            # A's own subscriber gets its publish once (not again from the cluster)
            own = await na.subscribe("news.>")
            await na.flush()
            await na.publish("news.us", b"once")
            first = await own.next_msg(WAIT)
            with pytest.raises(nats.errors.TimeoutError):
                await own.next_msg(0.5)
            await na.close()
            await nb.close()
            return got, reply, first

        got, reply, first = asyncio.run(main())
        text = httpx.get(f"http://127.0.0.1:{a.ports['http']}/metrics", timeout=WAIT).text
        metrics = dict(line.rsplit(" ", 1) for line in text.splitlines() if line.startswith("ferry_store_"))
        assert metrics["ferry_store_connected"] == "1" and int(metrics["ferry_store_metadata_sequence"]) > 0
        assert metrics["ferry_store_forward_dropped_total"] == "0"
        assert (got.subject, got.data, got.headers) == ("news.eu", b"hello", {"k": "v"})
        assert reply.data == b"echo:ping"
        assert first.data == b"once"


def _serve(tmp_path: Path, name: str, cluster, prefix: str):
    """``ferry serve --store <cluster>`` as a real process (NATS and HTTP only): (proc, nats url, http port)."""
    import re

    from ferry_harness import serve_process

    cwd = tmp_path / name
    cwd.mkdir(exist_ok=True)
    # A gateway started just after a node was killed waits for the elections (docs/scale-out.md).
    (cwd / "ferry.toml").write_text(f'[store]\nprefix = "{prefix}"\nconnect_timeout_seconds = 60\n\n' + ORDERS_TOML)
    proc, banner = serve_process(cwd, cwd / "data", "--config", "ferry.toml", "--store", cluster.url,
                                 "--only", "nats,http", "--nats-port", "0", "--http-port", "0")
    nport = re.search(r"^\s+nats +127\.0\.0\.1:(\d+)/tcp", banner, re.M)
    hport = re.search(r"^\s+http +127\.0\.0\.1:(\d+)/tcp", banner, re.M)
    assert nport and hport, banner
    return proc, f"nats://iggy:iggy@127.0.0.1:{nport.group(1)}", int(hport.group(1))


ORDERS_TOML = '[[binding]]\nstream = "orders"\ntopic = "eu"\ncreate = true\npartitions = 1\n'


def test_node_then_gateway_killed_loses_and_duplicates_no_acknowledged_message(tmp_path, cluster):
    """Publish with acknowledgements through gateway A (a real process) while one
    nats-server node is SIGKILLed, then SIGKILL A itself mid-stream: every message A
    acknowledged is stored exactly once, read back through a new gateway."""
    from ferry_harness import kill_process

    prefix = f"T{next(_prefixes)}k"
    proc_a, url_a, _ = _serve(tmp_path, "a", cluster, prefix)
    acked: list[int] = []
    failed: list[int] = []

    async def publish(first: int, n: int, nc) -> None:
        for i in range(first, first + n):
            try:
                r = await nc.request("orders.eu", str(i).encode(), timeout=10)
                if b'"error"' in r.data:
                    failed.append(i)
                else:
                    acked.append(i)
            except Exception:  # noqa: BLE001 - not acknowledged: may or may not be stored
                failed.append(i)

    async def main():
        nc = await nats.connect(url_a, max_reconnect_attempts=0)
        await publish(0, 100, nc)
        cluster.kill(cluster.meta_leader() or 0)  # the node most likely to lead our streams too
        await publish(100, 100, nc)
        # SIGKILL the gateway while requests are in flight
        pending = [asyncio.ensure_future(nc.request("orders.eu", str(i).encode(), timeout=10))
                   for i in range(200, 300)]
        await asyncio.sleep(0.05)
        kill_process(proc_a)
        for i, fut in zip(range(200, 300), pending):
            try:
                r = await fut
                (failed if b'"error"' in r.data else acked).append(i)
            except Exception:  # noqa: BLE001
                failed.append(i)
        try:
            await nc.close()
        except (Exception, asyncio.CancelledError):  # noqa: BLE001 - its server is gone
            # nats-py's close awaits the dead transport's wait_closed, which can end
            # cancelled (CancelledError is a BaseException): the CI run of 0dcbef4 did.
            pass

    try:
        asyncio.run(main())
    finally:
        if proc_a.poll() is None:
            kill_process(proc_a)
    assert len(acked) >= 150, (len(acked), failed[:10])  # the cluster kept working with 2 of 3 nodes
    proc_c, _, http_c = _serve(tmp_path, "c", cluster, prefix)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{http_c}", timeout=WAIT) as c:
            r = c.post("/users/login", json={"username": "iggy", "password": "iggy"})
            c.headers["authorization"] = f"Bearer {r.json()['access_token']['token']}"
            stored: list[int] = []
            while True:
                r = c.get("/streams/orders/topics/eu/messages",
                          params={"kind": "offset", "value": len(stored), "count": 1000, "partition_id": 0})
                batch = r.json()["messages"]
                if not batch:
                    break
                stored += [int(base64.b64decode(m["payload"])) for m in batch]
    finally:
        kill_process(proc_c)
        cluster.start_all()
    assert not set(acked) - set(stored), sorted(set(acked) - set(stored))[:10]
    assert len(stored) == len(set(stored)), "a message was stored twice"


def _until(check, limit_s: float = 60) -> None:
    """Wait for ``check()`` (a bound on a hang, not a timing assertion)."""
    import time

    deadline = time.monotonic() + limit_s
    while not check():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.1)


def _member(gw, seconds: float, until: str = "") -> subprocess.Popen:
    proc = subprocess.Popen([str(client_python("apache-iggy==0.9.0")), str(IGGY), str(gw.ports["iggy_tcp"]), "group",
                             str(seconds), *([until] if until else [])],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert json.loads(proc.stdout.readline()) == {"ready": True}, proc.stderr.read()
    return proc


def _lines(proc: subprocess.Popen) -> list[dict]:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-2000:]
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def test_a_consumer_group_spans_gateways_and_rebalances_when_one_dies(tmp_path, cluster):
    """Members connected to A and to B share the topic's two partitions (each reads
    one, together all); when B goes away its lease runs out and A's member takes both."""

    with gateways(tmp_path, cluster, tag="g") as (a, b):
        iggy(a, "setup")
        first = _member(a, 120, until="-102")  # (120 s bounds a hang)
        second = _member(b, 120, until="-4")  # its partition's last message
        with http(a) as ha, http(b) as hb:  # both joins reached both gateways (a KV write and its mirror)
            for c in (ha, hb):
                _until(lambda: c.get("/streams/orders/topics/eu/consumer-groups/g").json()["members_count"] == 2)
        iggy(a, "sendp", 0, 5, 0)
        iggy(b, "sendp", 1, 5, 0)
        got_b = _lines(second)
        (pb,) = {m["partition"] for m in got_b} or {None}
        b.stop()  # its gateway goes: no more lease renewals
        with http(a) as ha:  # the lease runs out and A's coordinator notices
            _until(lambda: ha.get("/streams/orders/topics/eu/consumer-groups/g").json()["members_count"] == 1)
        iggy(a, "sendp", pb, 3, 100)  # to the partition B's member had
        got_a = _lines(first)
    parts_a = {m["partition"] for m in got_a if not m["payload"].endswith(("-100", "-101", "-102"))}
    parts_b = {m["partition"] for m in got_b}
    assert len(parts_a) == 1 and len(parts_b) == 1 and parts_a != parts_b, (got_a, got_b)
    before = sorted(m["payload"] for m in got_a + got_b if not m["payload"].endswith(("-100", "-101", "-102")))
    assert before == sorted([f"p0-{i}" for i in range(5)] + [f"p1-{i}" for i in range(5)])
    # after B died, A's member got B's partition too, from the offset B's member committed
    assert [m["payload"] for m in got_a if m["partition"] == pb] == [f"p{pb}-{i}" for i in (100, 101, 102)]


@pytest.mark.parametrize("case", ["no_jetstream", "nobody_listens"])
def test_a_store_that_cannot_be_used_stops_start_up_with_exit_code_2(tmp_path, case):
    """``ferry serve --store``: a server without JetStream, or no server at all, is one
    clear line on stderr and exit code 2 (a bad configuration), not a traceback."""
    import sys

    from ferry_harness import free_port, wait_for_port
    from nats_cluster import find_nats_server

    port = free_port()
    server = None
    if case == "no_jetstream":
        server = subprocess.Popen([find_nats_server(), "-a", "127.0.0.1", "-p", str(port)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        assert wait_for_port(port, timeout=10)
    (tmp_path / "ferry.toml").write_text("[store]\nconnect_timeout_seconds = 1\n")
    try:
        done = subprocess.run([sys.executable, "-m", "gateway", "serve", "--config", str(tmp_path / "ferry.toml"),
                               "--data", str(tmp_path / "data"), "--only", "nats", "--nats-port", "0",
                               "--store", f"nats://127.0.0.1:{port}"], capture_output=True, text=True, timeout=60,
                              cwd=ROOT)
    finally:
        if server is not None:
            server.kill()
            server.wait()
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ferry: error: cannot use the store cluster: "), done.stderr
    assert ("JetStream is not enabled" if case == "no_jetstream" else "connection refused") in last
    assert "Traceback" not in done.stderr


def test_gateways_started_together_on_an_empty_store_all_come_up(tmp_path, cluster):
    """The compose case: gateways start at once on a new cluster; each tries to create the
    root user and the bound topic, one wins, the others take what it made."""
    import threading

    from ferry_harness import GatewayThread, gateway_config

    prefix = f"T{next(_prefixes)}s"
    cfgs = []
    for name in "abc":
        (tmp_path / name).mkdir()
        cfgs.append(gateway_config(tmp_path / name, ORDERS_TOML, FERRY_STORE_URL=cluster.url,
                                   FERRY_STORE_PREFIX=prefix))
    gws = [GatewayThread(cfg) for cfg in cfgs]
    starters = [threading.Thread(target=gw.start) for gw in gws]
    for t in starters:
        t.start()
    for t in starters:
        t.join(60)
    try:
        assert all(gw.ports for gw in gws), [gw._error for gw in gws]
        for gw in gws:
            with http(gw) as c:
                assert [t["name"] for t in c.get("/streams/orders/topics").json()] == ["eu"]
    finally:
        for gw in gws:
            if gw.ports:
                gw.stop()
