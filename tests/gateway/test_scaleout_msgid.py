"""Scale-out: a JetStream ``Nats-Msg-Id`` is de-duplicated across every gateway of one store
(issue 30, docs/scale-out.md "Fault schedule" item 4).

Two gateways share a real 3-node nats-server JetStream cluster (tests/support/nats_cluster.py).
A client retrying ``js.publish`` with the same msg id through another gateway must find
the message stored once and get nats-server's duplicate answer, ``duplicate: true`` with
the first copy's sequence, within the stream's ``duplicate_window``, and a new copy after
it. Each gateway first fills its own msg-id window (a publish of its own), so the other
gateway's copy can only be found through the cluster, not through a window refill from
the mirror.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import nats
import pytest

from ferry_harness import running_gateway
from nats_cluster_fixtures import nats_cluster_module  # noqa: F401 - the fixture
from tcp_proxy import TcpProxy

pytestmark = pytest.mark.slow
WAIT_S = 30  # guards a hang only
_prefixes = itertools.count()


@contextmanager
def gateway(tmp_path: Path, name: str, cluster, prefix: str, url: str | None = None):
    (tmp_path / name).mkdir(exist_ok=True)
    with running_gateway(tmp_path / name, FERRY_STORE_URL=url or cluster.url, FERRY_STORE_PREFIX=prefix) as gw:
        yield gw


async def publish(gw, subject: str, data: bytes, msg_id: str, timeout: float = WAIT_S):
    nc = await nats.connect(gw.url())
    try:
        return await nc.jetstream().publish(subject, data, headers={"Nats-Msg-Id": msg_id}, timeout=timeout)
    finally:
        await nc.close()


async def stored(gw, stream: str, want: int) -> list[tuple[int, bytes, str]]:
    """(seq, data, msg id) of every message of ``stream`` read through ``gw``, once it holds ``want``."""
    nc = await nats.connect(gw.url())
    try:
        js = nc.jetstream()
        deadline = time.monotonic() + WAIT_S
        while (await js.stream_info(stream)).state.messages < want:
            assert time.monotonic() < deadline, f"{stream} never held {want} messages"
            await asyncio.sleep(0.1)
        out = []
        for seq in range(1, (await js.stream_info(stream)).state.last_seq + 1):
            msg = await js.get_msg(stream, seq)
            out.append((msg.seq, msg.data, (msg.headers or {}).get("Nats-Msg-Id")))
        return out
    finally:
        await nc.close()


async def add_stream(gw, name: str, subjects: list[str], **cfg):
    nc = await nats.connect(gw.url())
    try:
        await nc.jetstream().add_stream(name=name, subjects=subjects, **cfg)
    finally:
        await nc.close()


async def wait_for_stream(gw, name: str):
    nc = await nats.connect(gw.url())
    try:
        deadline = time.monotonic() + WAIT_S
        while True:
            try:
                return await nc.jetstream().stream_info(name)
            except nats.js.errors.NotFoundError:
                assert time.monotonic() < deadline, f"{name} never reached this gateway"
                await asyncio.sleep(0.1)
    finally:
        await nc.close()


def test_a_msg_id_retried_through_another_gateway_is_stored_once(tmp_path, nats_cluster_module):  # noqa: F811
    cluster = nats_cluster_module
    prefix = f"D{next(_prefixes)}"
    # B starts once the stream exists (a gateway reads the JetStream streams when it starts)
    with gateway(tmp_path, "a", cluster, prefix) as a:
        asyncio.run(add_stream(a, "DEDUP", ["dd.>"]))
        with gateway(tmp_path, "b", cluster, prefix) as b:
            asyncio.run(wait_for_stream(b, "DEDUP"))
            # each gateway's own window is filled first (no refill from the mirror later)
            assert asyncio.run(publish(a, "dd.a", b"a0", "own-a")).seq == 1
            assert asyncio.run(publish(b, "dd.b", b"b0", "own-b")).seq == 2
            first = asyncio.run(publish(a, "dd.x", b"x", "m1"))
            assert (first.seq, bool(first.duplicate)) == (3, False)
            again = asyncio.run(publish(b, "dd.x", b"x", "m1"))
            assert (again.stream, again.seq, bool(again.duplicate)) == ("DEDUP", 3, True)
            # the other way round, and a repeat through the gateway that stored it
            first = asyncio.run(publish(b, "dd.y", b"y", "m2"))
            assert (first.seq, bool(first.duplicate)) == (4, False)
            again = asyncio.run(publish(a, "dd.y", b"y", "m2"))
            assert (again.seq, bool(again.duplicate)) == (4, True)
            again = asyncio.run(publish(b, "dd.y", b"y", "m2"))
            assert (again.seq, bool(again.duplicate)) == (4, True)
            after = asyncio.run(publish(b, "dd.z", b"z", "m3"))
            assert (after.seq, bool(after.duplicate)) == (5, False)
            want = [(1, b"a0", "own-a"), (2, b"b0", "own-b"), (3, b"x", "m1"), (4, b"y", "m2"), (5, b"z", "m3")]
            assert asyncio.run(stored(a, "DEDUP", 5)) == want
            assert asyncio.run(stored(b, "DEDUP", 5)) == want
    # Restarted (windows back from the saved state): the ids are still found, and an id
    # stored through B after A filled its window is found through A.
    with gateway(tmp_path, "a", cluster, prefix) as a, gateway(tmp_path, "b", cluster, prefix) as b:
        assert asyncio.run(publish(a, "dd.a", b"a1", "own-a2")).seq == 6
        assert asyncio.run(publish(b, "dd.b", b"b1", "own-b2")).seq == 7
        again = asyncio.run(publish(b, "dd.x", b"x", "m1"))
        assert (again.seq, bool(again.duplicate)) == (3, True)
        new = asyncio.run(publish(b, "dd.n", b"n", "m4"))
        assert (new.seq, bool(new.duplicate)) == (8, False)
        again = asyncio.run(publish(a, "dd.n", b"n", "m4"))
        assert (again.seq, bool(again.duplicate)) == (8, True)
        assert [m[2] for m in asyncio.run(stored(a, "DEDUP", 8))] == [
            "own-a", "own-b", "m1", "m2", "m3", "own-a2", "own-b2", "m4"]


def test_a_msg_id_is_stored_again_through_another_gateway_after_the_window(tmp_path, nats_cluster_module):  # noqa: F811
    cluster = nats_cluster_module
    prefix = f"W{next(_prefixes)}"
    window_s = 3.0
    with gateway(tmp_path, "a", cluster, prefix) as a:
        asyncio.run(add_stream(a, "SHORT", ["sw.>"], duplicate_window=window_s))
        with gateway(tmp_path, "b", cluster, prefix) as b:
            asyncio.run(wait_for_stream(b, "SHORT"))
            assert asyncio.run(publish(b, "sw.b", b"b0", "own-b")).seq == 1
            assert asyncio.run(publish(a, "sw.a", b"a0", "own-a")).seq == 2
            first = asyncio.run(publish(a, "sw.x", b"x", "m1"))
            assert (first.seq, bool(first.duplicate)) == (3, False)
            again = asyncio.run(publish(b, "sw.x", b"x", "m1"))
            assert (again.seq, bool(again.duplicate)) == (3, True)  # inside the window
            time.sleep(window_s * 2)
            later = asyncio.run(publish(b, "sw.x", b"x", "m1"))
            assert (later.seq, bool(later.duplicate)) == (4, False)  # past it: stored again, as nats-server does
            assert [m[2] for m in asyncio.run(stored(a, "SHORT", 4))] == ["own-b", "own-a", "m1", "m1"]
    # the partition stream in the cluster took the stream's window
    assert (4, window_s) in asyncio.run(partition_streams(cluster.url, prefix))


async def partition_streams(url: str, prefix: str) -> list[tuple[int, float]]:
    """(messages, duplicate_window s) of the store's partition streams, read from the cluster."""
    nc = await nats.connect(url.split(","))
    try:
        return [(i.state.messages, i.config.duplicate_window) for i in await nc.jetstream().streams_info()
                if i.config.name.startswith(f"{prefix.upper()}_P_")]
    finally:
        await nc.close()


def test_a_retry_is_not_acknowledged_before_its_first_copy_is_stored(tmp_path, nats_cluster_module):  # noqa: F811
    """docs/scale-out.md "Fault schedule" item 3 on the JetStream store: the first copy's
    append is in flight (two of three nodes frozen: no quorum), so its retry through the
    same gateway waits for it instead of being answered ``duplicate`` at a sequence the
    gateway only guessed; once the cluster stores the first copy, the retry is answered."""
    cluster = nats_cluster_module
    prefix = f"F{next(_prefixes)}"
    with gateway(tmp_path, "a", cluster, prefix) as a:
        asyncio.run(add_stream(a, "SETTLE", ["st.>"]))
        assert asyncio.run(publish(a, "st.a", b"a0", "own-a")).seq == 1
        frozen = [i for i in range(3) if cluster.running(i)][:2]
        try:
            for i in frozen:
                os.kill(cluster.pid(i), signal.SIGSTOP)
            for timeout in (1.0, 2.0):  # the first copy, then its retry: neither is answered
                with pytest.raises(nats.errors.TimeoutError):
                    asyncio.run(publish(a, "st.x", b"x", "m1", timeout=timeout))
        finally:
            for i in frozen:
                os.kill(cluster.pid(i), signal.SIGCONT)
        again = asyncio.run(publish(a, "st.x", b"x", "m1"))
        assert (again.seq, bool(again.duplicate)) == (2, True)
        assert [m[2] for m in asyncio.run(stored(a, "SETTLE", 2))] == ["own-a", "m1"]


class DropPublishes(TcpProxy):
    """A gateway's cluster connection that loses, once ``dropping`` is set, every publish
    whose header block holds ``marker`` (whole NATS protocol ops, so nothing else is cut):
    that message's append stays in flight, as while its stream has no leader."""

    def __init__(self, target: tuple[str, int], marker: bytes) -> None:
        super().__init__(target)
        self.marker = marker
        self.dropping = threading.Event()
        self.dropped = 0

    def relay(self, data: bytes, dst, from_client: bool, state: dict) -> bool:
        if not from_client:
            dst.sendall(data)
            return True
        buf = state.setdefault("buf", bytearray())
        buf += data
        out = bytearray()
        while (end := buf.find(b"\r\n")) >= 0:
            op = bytes(buf[:end]).split()
            size = end + 2
            if op and op[0].upper() in (b"PUB", b"HPUB"):
                size += int(op[-1]) + 2
                if len(buf) < size:
                    break
                if self.dropping.is_set() and op[0].upper() == b"HPUB" and self.marker in buf[end + 2:size]:
                    self.dropped += 1
                    del buf[:size]
                    continue
            out += buf[:size]
            del buf[:size]
        if out:
            dst.sendall(out)
        return True


def test_a_saved_window_never_holds_an_id_whose_append_was_in_flight(tmp_path, nats_cluster_module):  # noqa: F811
    """docs/scale-out.md "Fault schedule" item 3, seed 2's 2 lost messages: gateway A saved
    its msg-id window (a checkpoint, or its stop) while a client's first copy was still on
    its way to the cluster, at the sequence A had only guessed. The saved state is in the
    key-value tables every gateway shares, so gateway B, started next, took the id as stored
    and answered the client's retry ``duplicate: true`` at that sequence: the message was
    never stored anywhere. nats-server answers a duplicate only for a stored copy."""
    cluster = nats_cluster_module
    prefix = f"G{next(_prefixes)}"
    proxy = DropPublishes(("127.0.0.1", cluster.client_ports[0]), b"Nats-Msg-Id: js.m1\r\n")
    try:
        with gateway(tmp_path, "a", cluster, prefix, url=f"nats://127.0.0.1:{proxy.port}") as a:
            asyncio.run(add_stream(a, "GUESS", ["gs.>"]))
            assert asyncio.run(publish(a, "gs.a", b"a0", "own-a")).seq == 1
            proxy.dropping.set()
            with pytest.raises(nats.errors.TimeoutError):  # the first copy: on its way, not stored
                asyncio.run(publish(a, "gs.x", b"x", "m1", timeout=1.0))
            assert proxy.dropped >= 1
        # A stopped with the append still in flight; its stop saved the streams' state
        with gateway(tmp_path, "b", cluster, prefix) as b:
            again = asyncio.run(publish(b, "gs.x", b"x", "m1"))
            assert (again.seq, bool(again.duplicate)) == (2, False)  # stored now, not a duplicate of nothing
            assert [m[2] for m in asyncio.run(stored(b, "GUESS", 2))] == ["own-a", "m1"]
    finally:
        proxy.close()
