"""The real pravega 0.3.8 client across two Ferry gateways in scale-out mode (issue 14).

Two gateways share a real 3-node nats-server JetStream cluster (each test its own
store prefix, docs/scale-out.md); the client's scenario steps (clients/scaleout.py)
run against one gateway's controller or the other's, in separate processes, so
the cluster is the only thing they share: scopes and streams made through A's
controller, events written through A and read by a reader group through B (the
group's state is B's key-value tables, replicated through the metadata log),
NATS and HTTP messages sent through B read by a reader group on A, a transaction
committed on A read on B, a byte stream and stream tags made on A served by B, and
a writer whose connections are cut mid-write (by a proxy in front of A's segment
store) that must store every event exactly once.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import os
import signal
import socket
import threading
from collections import Counter
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
import nats
import pytest

from ferry_harness import running_gateway
from nats_cluster_fixtures import nats_cluster_module  # noqa: F401 - the module's cluster
from pravega_clients import SCENARIO_TIMEOUT_S, finish, run_scenario, start_scenario
from tcp_proxy import TcpProxy

pytestmark = pytest.mark.slow
WAIT = 30  # guards a hang only
_prefixes = itertools.count()
# Short tail parks keep reader shutdown quick (test_pravega_real_client.py does the same).
PARK = {"FERRY_PRAVEGA_TAIL_PARK_MS": "500"}
# How long the cut test keeps the cluster frozen: longer than the client takes to
# reconnect and set up again (milliseconds on loopback), far below the gateway's
# PUBLISH_RETRY_S (30 s, gateway/jetstream_store/publisher.py) after which an append fails.
FREEZE_S = 2.0


@pytest.fixture(scope="module")
def cluster(nats_cluster_module):  # noqa: F811 - the imported fixture, requested by name
    return nats_cluster_module


@contextmanager
def gateways(tmp_path: Path, nc_cluster, tag: str, a_env: dict | None = None):
    prefix = f"PV{next(_prefixes)}{tag}"
    with ExitStack() as stack:
        gws = []
        for name, extra in (("a", a_env or {}), ("b", {})):
            (tmp_path / name).mkdir(exist_ok=True)
            gws.append(stack.enter_context(running_gateway(
                tmp_path / name, FERRY_STORE_URL=nc_cluster.url, FERRY_STORE_PREFIX=prefix, **PARK, **extra)))
        yield gws


def scenario(gw, *args: str) -> dict[str, dict]:
    return run_scenario("scaleout.py", str(gw.ports["pravega_controller"]), *args)


def test_written_through_one_gateway_read_through_the_other(tmp_path, cluster):
    with gateways(tmp_path, cluster, "rw") as (a, b):
        got = scenario(a, "write", "so", "ev", "60")
        assert got["scope"] == {"value": True} and got["stream"] == {"value": True}
        assert got["written"] == {"value": 60}
        # B sees the scope and stream (metadata log) and reads every event, each key in order.
        got = scenario(b, "read", "so", "ev", "60")
        assert got["read"] == {"count": 60, "distinct": 60, "keys": ["k0", "k1", "k2", "k3", "k4"],
                               "ordered": True, "numbers": list(range(60)), "other": []}

        # NATS and HTTP messages sent through B reach a reader group on A.
        async def publish() -> None:
            nc = await nats.connect(b.url("nats"))
            await nc.publish("so.ev", b"from-nats", headers={"trace": "n1"})
            await nc.flush()
            await nc.close()

        asyncio.run(publish())
        with httpx.Client(base_url=f"http://127.0.0.1:{b.ports['http']}", timeout=WAIT) as http:
            token = http.post("/users/login", json={"username": "iggy", "password": "iggy"}).json()["access_token"]
            two = base64.b64encode((2).to_bytes(4, "little")).decode()  # Iggy HTTP: u32 LE, base64
            r = http.post("/streams/so/topics/ev/messages", headers={"authorization": f"Bearer {token['token']}"},
                          json={"partitioning": {"kind": "partition_id", "value": two},
                                "messages": [{"payload": base64.b64encode(b"from-http").decode()}]})
            assert r.status_code in (200, 201), r.text
        got = scenario(a, "read", "so", "ev", "62")
        assert got["read"] == {"count": 62, "distinct": 62, "keys": ["k0", "k1", "k2", "k3", "k4"],
                               "ordered": True, "numbers": list(range(60)), "other": ["from-http", "from-nats"]}


def test_transaction_committed_on_one_gateway_is_read_on_the_other(tmp_path, cluster):
    with gateways(tmp_path, cluster, "tx") as (a, b):
        scenario(a, "write", "tx", "warm", "1")  # the scope (and a stream the group does not read)
        got = scenario(a, "txn", "tx", "t")
        assert got["txn_committed"] == {"open": False}
        assert got["txn_aborted"] == {"open": False}
        got = scenario(b, "read", "tx", "t", "7")  # asks for one more: the aborted event never comes
        assert got["read"]["other"] == [f"c{i}" for i in range(6)]
        assert got["read"]["count"] == 6


class CuttingProxy(TcpProxy):
    """A TCP proxy ``listen -> target`` that, on each of its first ``cuts``
    connections to carry more than ``after`` bytes from the client, forwards the
    chunk that crossed the mark and then closes both sides before any answer to it
    can come back: the server got those appends, the client never sees their acks
    and must reconnect, set up again and resend what the server says is missing."""

    def __init__(self, listen: tuple[str, int], target: tuple[str, int], after: int, cuts: int,
                 on_cut=lambda: None) -> None:
        self.after, self.left, self.on_cut = after, cuts, on_cut
        self.cut = 0
        super().__init__(target, listen)

    def relay(self, data: bytes, dst: socket.socket, from_client: bool, state: dict) -> bool:
        with self.lock:
            dst.sendall(data)
            state["seen"] = state.get("seen", 0) + len(data)
            if from_client and state["seen"] > self.after and self.left > 0:
                self.left -= 1
                self.cut += 1
                self.on_cut()
                return False  # both sides shut down now, before an answer can come back
        return True


class Freezer:
    """SIGSTOP every node of the cluster, and SIGCONT them ``for_s`` later (or at
    ``thaw()``): appends A takes meanwhile stay unacknowledged by the cluster."""

    def __init__(self, cluster, for_s: float) -> None:
        self.cluster, self.for_s = cluster, for_s
        self.frozen: list[int] = []
        self.lock = threading.Lock()

    def freeze(self) -> None:
        with self.lock:
            if self.frozen:
                return
            self.frozen = [pid for i in range(3) if (pid := self.cluster.pid(i)) is not None]
            for pid in self.frozen:
                os.kill(pid, signal.SIGSTOP)
        threading.Timer(self.for_s, self.thaw).start()

    def thaw(self) -> None:
        with self.lock:
            for pid in self.frozen:
                os.kill(pid, signal.SIGCONT)
            self.frozen = []


def test_a_writer_cut_off_mid_write_stores_every_event_once(tmp_path, cluster):
    """A's controller names 127.0.0.2 as its segment store's host; a proxy there cuts the
    writer's connection right after an append block reached A, three times, and the
    cluster is frozen for a moment at each cut, so the block is still on its way to the
    cluster when the client reconnects and sets up again. A must answer AppendSetup
    with the event number the cluster stored once that block is settled, or the resent
    events are stored twice (the Rust client re-batches what it resends, so the
    JetStream Nats-Msg-Id of a block need not match)."""
    events = 300
    with gateways(tmp_path, cluster, "cut", {"FERRY_PRAVEGA_ADVERTISED_HOST": "127.0.0.2"}) as (a, b):
        seg = a.ports["pravega"]
        freezer = Freezer(cluster, FREEZE_S)
        proxy = CuttingProxy(("127.0.0.2", seg), ("127.0.0.1", seg), after=4000, cuts=3, on_cut=freezer.freeze)
        try:
            proc = start_scenario("scaleout.py", str(a.ports["pravega_controller"]), "waves", "cut", "s", str(events))
            lines = finish(proc, "scaleout.py", SCENARIO_TIMEOUT_S)
        finally:
            proxy.close()
            freezer.thaw()
        assert [line for line in lines if line["step"] == "written"] == [{"step": "written", "value": events}]
        assert proxy.cut >= 1
        got = scenario(b, "read", "cut", "s", str(events))
        numbers = got["read"]["numbers"]
        twice = sorted(n for n, k in Counter(numbers).items() if k > 1)
        assert numbers == list(range(events)), (twice, sorted(set(range(events)) - set(numbers)))
        assert got["read"]["count"] == events and got["read"]["distinct"] == events



def test_byte_stream_and_stream_policies(tmp_path, cluster):
    """extras.py's byte stream (conditional appends, whose expected offsets count this
    gateway's appends the cluster has not stored yet) and stream policies through A, in
    scale-out mode; then B's controller reports A's tags and B's segment store serves the
    byte stream from its truncated head (the start is metadata, replicated)."""
    with gateways(tmp_path, cluster, "by") as (a, b):
        got = run_scenario("extras.py", str(a.ports["pravega_controller"]), "bytes,policies")
        assert got["bytes_written"] == {"value": 18, "tail": 18, "head": 0}
        assert got["bytes_read"] == {"n": 11, "data": "byte stream"}
        assert got["bytes_truncated"] == {"head": 7, "tail": 18}
        assert got["bytes_after_truncate"] == {"data": "byte"}
        assert got["tags_after"] == {"value": ["c"]}
        assert "scaling" in got["scale_refused"]["text"]
        got = scenario(b, "bytes", "grp", "bytes", "pol")
        assert got["bytes"] == {"head": 7, "tail": 18, "data": "byte stream", "tags": ["c"]}


def test_unsettled_appends_are_counted_per_writer_and_wake_a_waiting_setup():
    """adapters/pravega/state.py's bookkeeping on its own (no cluster needed)."""
    from adapters.pravega.state import PravegaState

    st = PravegaState()
    key, other = (1, 2, 0), (1, 2, 1)
    woken: list[str] = []
    assert st.when_settled(key, "w", lambda: woken.append("idle")) is False  # nothing unsettled: no wait
    st.begin_append(key, "w", 100)
    st.begin_append(key, "w", 50)
    st.begin_append(key, "v", 7)
    st.begin_append(other, "w", 9)
    assert st.unsettled_bytes == {key: 157, other: 9}
    assert st.when_settled(key, "w", lambda: woken.append("w")) is True
    st.end_append(key, "w", 100)
    st.end_append(key, "v", 7)  # another writer settling wakes nobody waiting for "w"
    st.end_append(other, "w", 9)  # nor does "w" settling on another partition
    assert woken == [] and st.unsettled_bytes == {key: 50}
    st.end_append(key, "w", 50)
    assert woken == ["w"] and st.unsettled == {} and st.unsettled_bytes == {}
