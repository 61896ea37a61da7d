"""/metrics: every listener in the registry reports the shared per-listener families.

One gateway, every listener on a free port; real clients drive traffic through
each (apache-iggy 0.9.0 over TCP, QUIC and WebSocket, httpx for HTTP and the
NATS monitoring port, nats-py over TCP and WebSocket, the pravega 0.3.8 client
for the controller and the segment store), then ``GET /metrics`` must show, for
every listener, ``ferry_connections_total``/``ferry_connections_open``, messages
and bytes in and out, and (where the traffic made one) ``ferry_errors_total``
that moved by what the clients did (docs/internals.md "Metrics" says what each
listener counts)."""

from __future__ import annotations

import asyncio
import re
import socket
import time
import urllib.request

import httpx
import nats
import pytest

from ferry_harness import running_gateway
from gateway.registry import default_registry
from iggy_clients import run_scenario as run_iggy
from pravega_clients import run_scenario as run_pravega

pytestmark = pytest.mark.slow  # real client subprocesses

FAMILIES = {
    "connections_total": "ferry_connections_total",
    "connections_open": "ferry_connections_open",
    "messages_in": "ferry_messages_in_total",
    "messages_out": "ferry_messages_out_total",
    "bytes_in": "ferry_bytes_in_total",
    "bytes_out": "ferry_bytes_out_total",
    "errors": "ferry_errors_total",
}
N = 7  # messages each client sends
# What a listener does not count yet, each with the reason; asserted to stay 0, so a
# fix must update this table (and docs/internals.md).
GAPS: dict[tuple[str, str], str] = {}
# Families each listener's traffic below makes move (errors only where it made one).
MOVES = {name: ("connections_total", "messages_in", "messages_out", "bytes_in", "bytes_out")
         for name in ("iggy_tcp", "iggy_quic", "iggy_ws", "http", "nats", "nats_ws", "nats_monitor",
                      "pravega", "pravega_controller", "kafka")}
ERRORS_MADE = ("iggy_tcp", "iggy_quic", "iggy_ws", "http", "nats_monitor", "kafka")

_LINE = re.compile(r'^(ferry_[a-z_]+)\{listener="([a-z_]+)"\} (\S+)$')


def scrape(base: str) -> dict[tuple[str, str], float]:
    """{(family, listener): value} of the listener-labelled series of /metrics."""
    text = httpx.get(f"{base}/metrics", timeout=10).text
    out = {}
    for line in text.splitlines():
        m = _LINE.match(line)
        if m:
            out[(m.group(1), m.group(2))] = float(m.group(3))
    return out


async def nats_traffic(url: str) -> int:
    """Publish N messages to a subscriber on the same connection; the bytes published."""
    nc = await nats.connect(url)
    sub = await nc.subscribe("metrics.demo")
    for i in range(N):
        await nc.publish("metrics.demo", b"nats-%03d" % i)
    got = [await sub.next_msg(timeout=10) for _ in range(N)]
    await nc.close()
    assert len(got) == N
    return sum(len(m.data) for m in got)


def http_traffic(base: str) -> None:
    with httpx.Client(base_url=base, timeout=10) as http:
        token = http.post("/users/login", json={"username": "iggy", "password": "iggy"}).json()["access_token"]
        auth = {"authorization": f"Bearer {token['token']}"}
        assert http.post("/streams", json={"name": "m_http"}, headers=auth).status_code in (200, 201)
        r = http.post("/streams/m_http/topics", json={"name": "t", "partitions_count": 1, "compression_algorithm": "none", "message_expiry": 0, "max_topic_size": 0}, headers=auth)
        assert r.status_code in (200, 201), r.text
        body = {"partitioning": {"kind": "balanced", "value": ""},
                "messages": [{"payload": "aHR0cC1tc2c="} for _ in range(N)]}  # "http-msg"
        r = http.post("/streams/m_http/topics/t/messages", json=body, headers=auth)
        assert r.status_code in (200, 201), r.text
        r = http.get("/streams/m_http/topics/t/messages", headers=auth,
                     params={"consumer_id": 1, "partition_id": 0, "kind": "offset", "value": 0, "count": N})
        assert r.status_code == 200 and len(r.json()["messages"]) == N, r.text
        assert http.get("/streams/no_such_stream", headers=auth).status_code == 404


def kafka_traffic(gw) -> None:
    """N records produced and fetched with confluent-kafka (librdkafka), then a connection
    that breaks the protocol (a request before its SASL login: closed, one error)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
    conf = {"bootstrap.servers": f"127.0.0.1:{gw.ports['kafka']}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": "iggy", "sasl.password": "iggy"}
    p = Producer(conf)
    for i in range(N):
        p.produce("m_kafka", b"kafka-%03d" % i)
    assert p.flush(30) == 0
    c = Consumer({**conf, "group.id": "unused", "enable.auto.commit": False})
    c.assign([TopicPartition("m_kafka", 0, OFFSET_BEGINNING)])
    got = []
    for _ in range(300):
        m = c.poll(0.1)
        if m is not None and m.error() is None:
            got.append(m)
        if len(got) == N:
            break
    c.close()
    assert len(got) == N
    with socket.create_connection(("127.0.0.1", gw.ports["kafka"]), timeout=10) as s:
        s.sendall(bytes.fromhex("0000000f" "0003" "0001" "00000001" "0001" "41" "ffffffff"))  # Metadata v1
        assert s.recv(64) == b""  # closed: no request before SASL


def test_every_listener_reports_the_shared_families(tmp_path):
    names = set(default_registry().specs)
    assert names == set(MOVES), "a listener was added: say here what its traffic is"
    with running_gateway(tmp_path, FERRY_PRAVEGA_TAIL_PARK_MS="500") as gw:
        assert set(gw.ports) == names  # every listener of the registry runs
        base = f"http://127.0.0.1:{gw.ports['http']}"
        before = scrape(base)

        for transport in ("tcp", "quic", "ws"):
            done = run_iggy("apache-iggy==0.9.0", "current_metrics.py", gw.ports[f"iggy_{transport}"],
                            transport, str(N))[-1]
            assert done == {"step": "done", "polled": N, "payload_bytes": 10 * N, "again": "error"}
        http_traffic(base)
        nats_bytes = asyncio.run(nats_traffic(gw.url("nats")))
        asyncio.run(nats_traffic(gw.url("nats_ws", "ws")))
        monitor = f"http://127.0.0.1:{gw.ports['nats_monitor']}"
        with httpx.Client(base_url=monitor, timeout=10) as mon:
            assert mon.get("/varz").status_code == 200
            assert mon.get("/no-such-endpoint").status_code == 404
        controller = str(gw.ports["pravega_controller"])
        assert run_pravega("cross.py", controller, "write")["written"] == {"value": 20}
        assert len(run_pravega("cross.py", controller, "read", "20")["read"]["got"]) == 20
        kafka_traffic(gw)

        after = scrape(base)

    def delta(listener: str, key: str) -> float:
        fam = FAMILIES[key]
        return after.get((fam, listener), 0) - before.get((fam, listener), 0)

    for listener in sorted(names):
        for key, fam in FAMILIES.items():
            if key == "errors" and listener not in ERRORS_MADE:
                continue
            assert (fam, listener) in after or (listener, key) in GAPS, f"no {fam}{{listener={listener!r}}}"
        for key in MOVES[listener] + (("errors",) if listener in ERRORS_MADE else ()):
            if (listener, key) in GAPS:
                assert delta(listener, key) == 0, f"{listener} {key} now counted: update GAPS and the docs"
            else:
                assert delta(listener, key) > 0, f"{FAMILIES[key]}{{listener={listener!r}}} did not move"
        assert after[(FAMILIES["connections_open"], listener)] >= 0

    # Exact counts where the client's traffic fixes them.
    for transport in ("tcp", "quic", "ws"):
        label = f"iggy_{transport}"
        assert delta(label, "messages_in") == N and delta(label, "messages_out") == N
        assert delta(label, "bytes_in") == 10 * N  # payload bytes of the sends
        assert delta(label, "bytes_out") >= 10 * N  # polled messages as sent: their headers too
        assert delta(label, "connections_total") >= 1 and delta(label, "errors") >= 1
    assert delta("http", "messages_in") == N and delta("http", "messages_out") == N
    assert delta("http", "bytes_in") == len(b"http-msg") * N
    assert delta("nats", "messages_in") == N and delta("nats", "messages_out") == N
    assert delta("nats", "bytes_in") == nats_bytes
    # as nats-server's out_bytes: the message only, no protocol line (client.go deliverMsg)
    assert delta("nats", "bytes_out") == nats_bytes
    assert delta("nats_ws", "messages_in") == N and delta("nats_ws", "messages_out") == N
    assert delta("nats_monitor", "messages_in") == 2 and delta("nats_monitor", "errors") == 1
    assert delta("pravega", "messages_in") == 20
    assert delta("pravega", "messages_out") == 20  # the events whose frames the reads delivered
    assert delta("kafka", "messages_in") == N and delta("kafka", "messages_out") == N
    assert delta("kafka", "bytes_in") == len(b"kafka-000") * N and delta("kafka", "errors") >= 1
    # The scrape's own connection is open while /metrics renders.
    assert after[(FAMILIES["connections_open"], "http")] >= 1


def test_nats_errors_are_counted(tmp_path):
    """Each non-fatal -ERR (a refused SUB), and a fatal one that closes the connection,
    is one ferry_errors_total{listener="nats"}; nothing else is."""
    def errors(gw) -> float:
        text = urllib.request.urlopen(f"http://127.0.0.1:{gw.ports['http']}/metrics", timeout=10).read().decode()
        m = re.search(r'^ferry_errors_total\{listener="nats"\} (\S+)$', text, re.M)
        return float(m.group(1)) if m else 0.0

    with running_gateway(tmp_path) as gw:
        with socket.create_connection(("127.0.0.1", gw.ports["nats"]), timeout=10) as s:
            f = s.makefile("rb")
            f.readline()
            s.sendall(b'CONNECT {"verbose":false,"user":"iggy","pass":"iggy"}\r\nSUB a 1\r\nPUB a 2\r\nhi\r\nPING\r\n')
            for line in iter(f.readline, b"PONG\r\n"):  # EOF would spin forever
                assert line, "the server closed the connection before its PONG"
            base = errors(gw)
            s.sendall(b"SUB a..b 2\r\nSUB .x 3\r\nPING\r\n")   # two "Invalid Subject" -ERRs, still open
            lines = []
            while (line := f.readline()) != b"PONG\r\n":
                lines.append(line)
            assert lines == [b"-ERR 'Invalid Subject'\r\n"] * 2
            deadline = 50
            while errors(gw) < base + 2 and deadline:
                s.sendall(b"PING\r\n")
                f.readline()
                deadline -= 1
            assert errors(gw) == base + 2
            s.sendall(b"BOGUS\r\n")   # fatal: -ERR 'Unknown Protocol Operation', then close
            assert f.readline().startswith(b"-ERR 'Unknown Protocol Operation'")
            assert f.readline() == b""
        for _ in range(100):
            if errors(gw) == base + 3:
                break
            time.sleep(0.05)
        assert errors(gw) == base + 3
