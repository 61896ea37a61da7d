"""The session over a real broker, no sockets: auth, permissions, ids, every
generation reading what every other wrote, cross-protocol live delivery."""

from __future__ import annotations

import os
import struct
import zlib

import pytest
import xxhash

from adapters.iggy import replies as R
from adapters.iggy.codec import legacy_request, vsr_request
from adapters.iggy.connection import guess_legacy_dialect
from adapters.iggy.errors import IggyError
from adapters.iggy.messages import WireMessage
from adapters.iggy.types import ConsumerId, PartitioningValue, Strategy
from core.broker import Broker
from core.message import HeaderKind, Headers, HeaderValue
from iggy_pair import Client

E = IggyError


@pytest.fixture
def broker(tmp_path):
    b = Broker.open(tmp_path / "data")
    yield b
    b.close()


def logged_in(broker, dialect):
    c = Client(broker, dialect)
    assert c.login() == 0
    return c


ALL = (1, 2, 3, 4, 5)
ONE_BASED = (1, 5)


def test_commands_need_login_except_the_public_ones(broker):
    for dialect in ALL:
        c = Client(broker, dialect)
        assert c.call("system.ping")[0] == 0
        assert c.call("system.stats")[0] == 0
        assert c.call("stream.get", stream_id=1)[0] == E.UNAUTHENTICATED
        assert c.call("stream.create", name="s")[0] == E.UNAUTHENTICATED


def test_bad_password_and_unknown_user(broker):
    for dialect in ALL:
        assert Client(broker, dialect).login("iggy", "nope") == E.INVALID_CREDENTIALS
        assert Client(broker, dialect).login("ghost", "whatever") == E.INVALID_CREDENTIALS


def test_login_replies_per_dialect(broker):
    c1 = Client(broker, 1)
    c1.raw(legacy_request(1))
    status, body = c1.call("user.login", username="iggy", password="iggy", version="0.6.202")
    assert (status, body) == (0, struct.pack("<I", 1))  # root is id 1 in the seed era
    c2 = Client(broker, 2)
    assert c2.call("user.login", username="iggy", password="iggy", version="0.10.0") == (0, struct.pack("<I", 0))
    c3 = Client(broker, 3)
    assert c3.login() == 0 and c3.vsr_session > 0
    # apache-iggy 0.5.0 (SDK 0.7.0) still numbers from 1, 0.6.0 (SDK 0.8.0) from 0 (iggy-middle.md 2)
    assert Client(broker, 5).call("user.login", username="iggy", password="iggy", version="0.7.0") == (
        0, struct.pack("<I", 1))
    assert Client(broker, 4).call("user.login", username="iggy", password="iggy", version="0.8.0") == (
        0, struct.pack("<I", 0))


def test_ids_are_translated_at_the_edge(broker):
    c1, c2 = logged_in(broker, 1), logged_in(broker, 2)
    details = c1.ok("stream.create", stream_id=5, name="seed")  # client-chosen id 5 -> canonical 4
    assert R.STREAM.decode(1, details).id == 5
    assert broker.get_stream("seed").id == 4
    rec, _ = R.STREAM.decode(2, c2.ok("stream.get", stream_id=4), exact=False)
    assert rec.id == 4 and rec.name == "seed"
    assert c1.call("stream.get", stream_id=0) == (0, b"")  # id 0 names nothing in the seed era
    c5 = logged_in(broker, 5)  # apache-iggy 0.5.0 chooses ids and counts from 1 too
    assert R.STREAM.decode(5, c5.ok("stream.create", stream_id=9, name="five")).id == 9
    assert broker.get_stream("five").id == 8
    assert R.STREAM.decode(4, logged_in(broker, 4).ok("stream.get", stream_id=8), exact=False)[0].name == "five"


def test_permissions_are_enforced(broker):
    broker.meta.users.create_user("alice", "secret1")  # no permissions at all
    root = logged_in(broker, 2)
    root.ok("stream.create", name="s1")
    for dialect in (1, 2, 3):
        c = Client(broker, dialect)
        assert c.login("alice", "secret1") == 0
        assert c.call("stream.create", name="nope")[0] == E.UNAUTHORIZED
        assert c.call("topic.create", stream_id="s1", partitions_count=1, name="t")[0] == E.UNAUTHORIZED


def test_pat_login(broker):
    token = broker.meta.users.create_pat(0, "ci-token")
    c = Client(broker, 2)
    assert c.call("pat.login", token=token) == (0, struct.pack("<I", 0))
    assert c.call("stream.list")[0] == 0
    assert Client(broker, 2).call("pat.login", token="wrong")[0] == E.INVALID_PAT
    c3 = Client(broker, 3)
    status, body = c3.call("pat.login_register", protocol_version=0x2C00, sdk_name="rust-sdk",
                           sdk_version="0.11.0", token=token)
    assert status == 0 and R.LOGIN_REPLY.decode(3, body).user_id == 0


@pytest.mark.parametrize("dialect", [1, 2])
def test_pat_login_then_structural_dialect_detection(broker, dialect):
    """A PAT login has no version (iggy-middle.md 3.1 step 4): the first frame whose
    layout differs between the legacy dialects decides; ids follow."""
    token = broker.meta.users.create_pat(0, "ci-token")
    c = Client(broker, dialect)
    assert c.call("pat.login", token=token)[0] == 0
    c.ok("stream.create", name="s")  # dialect 1 sends u32 id 0 + name; 2 sends the name only
    assert c.session.dialect == dialect
    rec, _ = R.STREAM.decode(dialect, c.ok("stream.get", stream_id="s"), exact=False)
    assert rec.id == (1 if dialect == 1 else 0)


@pytest.mark.parametrize("code,body,expected", [
    (100, "01010401000000 010401000000 010401000000 01000000 01 0000000000000000 0a000000 00", 1),  # iggy.md 4.7
    (100, "01010400000000 02027331 02027431 0100000000 01 0000000000000000 0a000000 00", 2),  # middle 6.12
    (121, "02020267 31 02027331 02027431 01 00000000 0100000000000000".replace(" 31", "31"), 2),
    (202, "01000000 02 7331", 1), (202, "02 7331", 2), (12, "", 2),
    (101, "02027331 02027431 020401000000", 1), (101, "12000000 02027331", 2),
    (302, "02027331 01000000 02000000 01 ffffffffffffffff 0000000000000000 00 02 7431", 1),
    (302, "02027331 02000000 01 0000000000000000 0000000000000000 00 02 7431", 2),
    (200, "01 04 01000000", None),
])
def test_guess_legacy_dialect(code, body, expected):
    assert guess_legacy_dialect(code, bytes.fromhex(body.replace(" ", ""))) == expected


def test_not_found_and_already_exists_codes(broker):
    c = logged_in(broker, 2)
    assert c.call("stream.get", stream_id="nope") == (0, b"")
    assert c.call("topic.get", stream_id="nope", topic_id="t") == (0, b"")
    assert c.call("topic.list", stream_id="nope")[0] == E.STREAM_NAME_NOT_FOUND
    assert c.call("topic.list", stream_id=7)[0] == E.STREAM_ID_NOT_FOUND
    c.ok("stream.create", name="s")
    assert c.call("stream.create", name="s")[0] == E.STREAM_NAME_ALREADY_EXISTS
    assert c.call("stream.create", name="")[0] == E.INVALID_STREAM_NAME
    c.ok("topic.create", stream_id="s", partitions_count=1, name="t")
    assert c.call("topic.create", stream_id="s", partitions_count=1, name="t")[0] == E.TOPIC_NAME_ALREADY_EXISTS
    assert c.call("topic.create", stream_id="s", partitions_count=1001, name="u")[0] == E.TOO_MANY_PARTITIONS
    poll = dict(consumer=ConsumerId(1, 0), stream_id="s", topic_id="t", strategy=Strategy(1, 0), count=1)
    assert c.call("message.poll", **poll, partition_id=3)[0] == E.PARTITION_NOT_FOUND
    assert c.call("message.poll", **{**poll, "count": 0}, partition_id=0)[0] == E.INVALID_MESSAGES_COUNT
    c1 = logged_in(broker, 1)
    assert c1.call("stream.create", stream_id=1, name="other")[0] == E.STREAM_ID_ALREADY_EXISTS


def test_unknown_codes_get_status_3(broker):
    c = logged_in(broker, 2)
    assert c.raw(legacy_request(14)) == (E.INVALID_COMMAND, b"")
    c3 = logged_in(broker, 3)
    for code in (14, 103, 104, 123):  # in the 0.9.0 wheel, layouts unknown (iggy-current.md 14)
        assert c3.raw(vsr_request(2, b"", code=code))[0] == E.INVALID_COMMAND
    assert c3.raw(vsr_request(99, b""))[0] == E.INVALID_COMMAND


# -- every generation reads what every other wrote ------------------------------------------------
TYPED = [("str", HeaderValue.string("hello")), ("flag", HeaderValue.bool(True)), ("n", HeaderValue.uint8(7)),
         ("big", HeaderValue.int64(-5)), ("f", HeaderValue.float64(1.5)), ("raw", HeaderValue.raw(b"\x00\x01"))]


def _headers_block(dialect: int) -> bytes:
    h = Headers(TYPED)
    return h.encode_legacy() if dialect in (1, 4, 5) else h.encode()  # the seed map has no key kinds


def _send(c: Client, payload: bytes, dialect: int):
    pid = 1 if dialect in ONE_BASED else 0
    c.ok("message.send", stream_id="s", topic_id="t", partitioning=PartitioningValue(2, struct.pack("<I", pid)),
         messages=(WireMessage(0, payload, _headers_block(dialect), 1_700_000_000_000_000),))


def _poll(c: Client, dialect: int) -> list[tuple[bytes, Headers, int]]:
    """(payload, headers, checksum-ok) of every message in partition 0."""
    body = c.ok("message.poll", consumer=ConsumerId(1, 0), stream_id="s", topic_id="t",
                partition_id=1 if dialect in ONE_BASED else 0, strategy=Strategy(3, 0), count=100)
    prefix, pos = R.POLL_PREFIX.decode(dialect, body, exact=False)
    out = []
    if dialect == 1:
        while pos < len(body):
            offset, state, ts, lo, hi, crc, hlen = struct.unpack_from("<QBQQQII", body, pos)
            pos += 41
            headers = Headers.decode_legacy(body[pos : pos + hlen])
            pos += hlen
            (plen,) = struct.unpack_from("<I", body, pos)
            payload = body[pos + 4 : pos + 4 + plen]
            pos += 4 + plen
            out.append((payload, headers, crc == zlib.crc32(payload)))
    elif dialect in (4, 5):  # 56-byte header, seed map after the payload; XXH3-64 or CRC32 of bytes 8..
        checksum = xxhash.xxh3_64_intdigest if dialect == 4 else zlib.crc32
        while pos < len(body):
            csum, _lo, _hi, _off, _ts, _o, hlen, plen = struct.unpack_from("<QQQQQQII", body, pos)
            end = pos + 56 + plen + hlen
            ok = csum == checksum(body[pos + 8 : end])
            out.append((body[pos + 56 : pos + 56 + plen], Headers.decode_legacy(body[pos + 56 + plen : end]), ok))
            pos = end
    elif dialect == 2:
        while pos < len(body):
            csum, _lo, _hi, _off, _ts, _o, hlen, plen, _r = struct.unpack_from("<QQQQQQIIQ", body, pos)
            end = pos + 64 + plen + hlen
            ok = csum == xxhash.xxh3_64_intdigest(body[pos + 8 : end])
            out.append((body[pos + 64 : pos + 64 + plen], Headers.decode(body[pos + 64 + plen : end]), ok))
            pos = end
    else:
        while pos < len(body):
            _p, _b, _t, _o, length, _c, n = struct.unpack_from("<QQQQQQI", body, pos)
            fpos, end = pos + 256, pos + length
            for _ in range(n):
                csum, _lo, _hi, _od, _td, hlen, plen, _r = struct.unpack_from("<QQQIIIIQ", body, fpos)
                fend = fpos + 48 + plen + hlen
                ok = csum == xxhash.xxh3_64_intdigest(body[fpos + 8 : fend])
                out.append((body[fpos + 48 : fpos + 48 + plen], Headers.decode(body[fpos + 48 + plen : fend]), ok))
                fpos = fend
            pos = end
    assert prefix.count == len(out)
    return out


def test_cross_generation_send_and_poll(broker):
    clients = {d: logged_in(broker, d) for d in ALL}
    clients[2].ok("stream.create", name="s")
    clients[2].ok("topic.create", stream_id="s", partitions_count=1, name="t")
    for d, c in clients.items():
        _send(c, f"from-{d}".encode(), d)
    for d, c in clients.items():
        got = _poll(c, d)
        assert [p for p, _h, _ok in got] == [f"from-{d}".encode() for d in ALL]
        assert all(ok for _p, _h, ok in got)
        for _p, headers, _ok in got:
            # every generation carries the typed values; the seed map's keys are strings anyway
            assert headers.to_dict() == Headers(TYPED).to_dict()


def test_iggy_append_reaches_a_core_live_subscriber(broker):
    """Cross-protocol: what Iggy appends is offered live on the topic's subject
    (docs/addressing.md), where the NATS adapter's subscriptions listen."""
    got = []

    class Sub:
        def deliver(self, delivery):
            got.append(delivery)
            return True

    broker.live.subscribe("orders.created", Sub())
    c = logged_in(broker, 3)
    c.ok("stream.create", name="orders")
    c.ok("topic.create", stream_id="orders", partitions_count=1, name="created")
    c.ok("message.send", stream_id="orders", topic_id="created", partitioning=PartitioningValue(2, bytes(4)),
         messages=(WireMessage(0, b"hi", Headers([("k", "v")]).encode(), 1_700_000_000_000_000),))
    assert [(d.subject, bytes(d.payload), Headers.decode(d.headers).to_dict()) for d in got] == [
        ("orders.created", b"hi", Headers([("k", "v")]).to_dict())]


def test_consumer_group_assignment_and_sync(broker):
    a, b = logged_in(broker, 3), logged_in(broker, 3)
    a.ok("stream.create", name="s")
    a.ok("topic.create", stream_id="s", partitions_count=3, name="t")
    a.ok("consumer_group.create", stream_id="s", topic_id="t", name="g")
    assert a.call("consumer_group.sync", stream_id="s", topic_id="t", group_id="g") == (0, b"")  # not a member
    a.ok("consumer_group.join", stream_id="s", topic_id="t", group_id="g")
    b.ok("consumer_group.join", stream_id="s", topic_id="t", group_id="g")
    sa = R.SYNC_GROUP.decode(3, a.ok("consumer_group.sync", stream_id="s", topic_id="t", group_id="g"))
    sb = R.SYNC_GROUP.decode(3, b.ok("consumer_group.sync", stream_id="s", topic_id="t", group_id="g"))
    assert sorted(sa.partitions + sb.partitions) == [0, 1, 2] and sa.generation == sb.generation
    b.session.close()  # disconnect: a gets everything
    sa = R.SYNC_GROUP.decode(3, a.ok("consumer_group.sync", stream_id="s", topic_id="t", group_id="g"))
    assert sa.partitions == (0, 1, 2)
    poll = dict(consumer=ConsumerId(2, "g"), stream_id="s", topic_id="t", strategy=Strategy(5, 0), count=1)
    assert b.call("message.poll", **poll, partition_id=None)[0] == E.CONSUMER_GROUP_MEMBER_NOT_FOUND
    assert a.call("message.poll", **poll, partition_id=None)[0] == 0


@pytest.mark.parametrize("dialect", [1, 2, 3])
def test_client_details_list_the_groups_a_client_is_in(broker, dialect):
    """iggy.md 5.7/5.8: ClientInfo carries consumer_groups_count; GetMe and GetClient
    (ClientInfoDetails) follow it with that many (stream, topic, group) wire ids."""
    a, b = logged_in(broker, dialect), logged_in(broker, dialect)
    e = 1 if dialect == 1 else 0
    a.ok("stream.create", name="s", **({"stream_id": 1} if dialect == 1 else {}))
    a.ok("topic.create", stream_id="s", partitions_count=2, name="t", **({"topic_id": 1} if dialect == 1 else {}))
    for name, gid in (("g", 1), ("h", 2)):
        a.ok("consumer_group.create", stream_id="s", topic_id="t", name=name,
             **({"group_id": gid} if dialect == 1 else {}))
    me = a.ok("client.me")
    info, pos = R.CLIENT_INFO.decode(dialect, me, 0, exact=False)
    assert info.consumer_groups_count == 0 and pos == len(me)  # nothing after a zero count
    a.ok("consumer_group.join", stream_id="s", topic_id="t", group_id="h")
    a.ok("consumer_group.join", stream_id="s", topic_id="t", group_id="g")
    for body in (a.ok("client.me"), b.ok("client.get", client_id=a.session.client_id)):
        info, pos = R.CLIENT_INFO.decode(dialect, body, 0, exact=False)
        groups = []
        while pos < len(body):
            g, pos = R.CLIENT_GROUP.decode(dialect, body, pos, exact=False)
            groups.append((g.stream_id, g.topic_id, g.group_id))
        assert info.consumer_groups_count == 2 and groups == [(e, e, e), (e, e, 1 + e)]
    listed, body = {}, b.ok("client.list")   # GetClients: ClientInfo only, the count included
    pos = 0
    while pos < len(body):
        info, pos = R.CLIENT_INFO.decode(dialect, body, pos, exact=False)
        listed[info.client_id] = info.consumer_groups_count
    assert listed == {a.session.client_id: 2, b.session.client_id: 0}
    a.ok("consumer_group.leave", stream_id="s", topic_id="t", group_id="g")
    info = R.CLIENT_INFO.decode(dialect, b.ok("client.get", client_id=a.session.client_id), 0, exact=False)[0]
    assert info.consumer_groups_count == 1


def test_stats_count_segments_not_partitions(tmp_path):
    from core.broker import BrokerConfig
    from core.log import LogConfig

    b = Broker.open(tmp_path / "small", BrokerConfig(log=LogConfig(segment_bytes=300, fsync="never")))
    try:
        a = logged_in(b, 2)
        a.ok("stream.create", name="s")
        a.ok("topic.create", stream_id="s", partitions_count=2, name="t")
        for i in range(6):
            _send(a, b"x" * 100 + bytes([i]), 2)
            b.flush()  # one batch per send: a 300-byte segment rolls every couple of sends
        stats = R.STATS.decode(2, a.ok("system.stats"))
        assert stats.partitions_count == 2 and stats.segments_count == b.totals().segments > 2
    finally:
        b.close()


def test_consumer_offsets(broker):
    c = logged_in(broker, 2)
    c.ok("stream.create", name="s")
    c.ok("topic.create", stream_id="s", partitions_count=1, name="t")
    for p in (b"a", b"b"):
        c.ok("message.send", stream_id="s", topic_id="t", partitioning=PartitioningValue(2, bytes(4)),
             messages=(WireMessage(0, p, b"", 1),))
    key = dict(consumer=ConsumerId(1, "worker"), stream_id="s", topic_id="t", partition_id=0)
    assert c.call("consumer_offset.get", **key) == (0, b"")
    assert c.call("consumer_offset.store", **key, offset=5)[0] == E.INVALID_OFFSET
    c.ok("consumer_offset.store", **key, offset=1)
    info = R.OFFSET_INFO.decode(2, c.ok("consumer_offset.get", **key))
    assert (info.partition_id, info.current_offset, info.stored_offset) == (0, 1, 1)
    c.ok("consumer_offset.delete", **key)
    assert c.call("consumer_offset.delete", **key)[0] == E.CONSUMER_OFFSET_NOT_FOUND


@pytest.mark.parametrize("dialect", [1, 2, 3])
def test_send_to_a_sealed_topic_is_feature_unavailable(broker, dialect):
    """core TopicSealed -> 5 FeatureUnavailable (adapters/iggy/errors.py); nothing is stored."""
    c = logged_in(broker, dialect)
    broker.create_stream("s")
    broker.create_topic("s", "t", 1)
    broker.topic_state.seal_topic("s", "t")
    first = 1 if dialect in ONE_BASED else 0
    status, _ = c.call("message.send", stream_id=first, topic_id=first,
                       partitioning=PartitioningValue(2, struct.pack("<I", first)),
                       messages=(WireMessage(0, b"x", b"", 1),))
    assert status == E.FEATURE_UNAVAILABLE
    assert broker.read_messages("s", "t", 0, 0, 10) == []


def test_vsr_topic_options_are_applied(broker):
    """iggy-current.md 6.8: the 0.9.0 client sends topic settings as a TLV options block."""
    c = logged_in(broker, 3)
    c.ok("stream.create", name="s")
    options = Headers([("compression_algorithm", "gzip"), ("consumer_offset_durability", "replicated"),
                       ("durability", "replicated"), ("max_topic_size", HeaderValue.uint64(10_000_000)),
                       ("message_expiry", HeaderValue.uint64(60_000_000)),
                       ("segment_size", HeaderValue.uint64(1 << 20))]).encode()  # the cap's floor (1019)
    c.ok("topic.create", stream_id="s", partitions_count=1, name="t", options=options)
    info = broker.get_topic("s", "t")
    assert (info.compression_algorithm, info.message_expiry, info.max_topic_size) == ("gzip", 60_000_000, 10_000_000)
    assert info.segment_bytes == 1 << 20
    bad = Headers([("compression_algorithm", "zip")]).encode()  # a known key's bad value: 4042
    assert c.call("topic.create", stream_id="s", partitions_count=1, name="u", options=bad)[0] == 4042
    assert c.call("topic.create", stream_id="s", partitions_count=1, name="u", options=b"\x02")[0] == E.INVALID_COMMAND


@pytest.mark.parametrize("dialect", [2, 3])
def test_a_group_member_polls_only_its_partitions(broker, dialect):
    a, b = logged_in(broker, dialect), logged_in(broker, dialect)
    a.ok("stream.create", name="s")
    a.ok("topic.create", stream_id="s", partitions_count=2, name="t")
    a.ok("consumer_group.create", stream_id="s", topic_id="t", name="g")
    a.ok("message.send", stream_id="s", topic_id="t", partitioning=PartitioningValue(2, struct.pack("<I", 1)),
         messages=(WireMessage(0, b"p1", b"", 1),))
    for c in (a, b):
        c.ok("consumer_group.join", stream_id="s", topic_id="t", group_id="g")
    poll = dict(consumer=ConsumerId(2, "g"), stream_id="s", topic_id="t", strategy=Strategy(3, 0), count=10)
    status, body = a.call("message.poll", **poll, partition_id=1)  # partition 1 belongs to b
    # an empty poll; dialect 3 names partition u32::MAX, which makes the client re-sync
    # (apache/iggy core/server/src/dispatch.rs handle_poll_messages; test_iggy_error_codes.py)
    resync = 0xFFFF_FFFF if dialect == 3 else 0
    assert (status, R.POLL_PREFIX.decode(dialect, body)) == (0, R.POLL_PREFIX.make(partition_id=resync,
                                                                                  current_offset=0, count=0))
    prefix, _ = R.POLL_PREFIX.decode(dialect, b.ok("message.poll", **poll, partition_id=1), exact=False)
    assert prefix.count == 1


def test_clients_and_stats(broker):
    a, b = logged_in(broker, 2), Client(broker, 2)
    infos, body = [], a.ok("client.list")
    pos = 0
    while pos < len(body):
        info, pos = R.CLIENT_INFO.decode(2, body, pos, exact=False)
        infos.append(info)
    assert [(i.client_id, i.user_id) for i in infos] == [(a.session.client_id, 0), (b.session.client_id, 0)]
    me = R.CLIENT_INFO.decode(2, a.ok("client.me"))
    assert me.client_id == a.session.client_id and me.transport == 1
    assert a.call("client.get", client_id=999_999) == (0, b"")
    assert a.call("client.get", client_id=0)[0] == E.INVALID_CLIENT_ID
    stats = R.STATS.decode(2, a.ok("system.stats"))
    assert stats.clients_count == 2
    # the process's own figures (core/procstats.py), as HTTP /stats reports them
    assert stats.process_id == os.getpid() and stats.threads_count >= 1
    assert 1 << 20 < stats.memory_usage <= stats.total_memory and 0 < stats.available_memory <= stats.total_memory
    assert 0.0 <= stats.cpu_usage and 0.0 <= stats.total_cpu_usage <= 100.0
    assert 0 < stats.run_time and stats.start_time > 1_700_000_000_000_000
    assert stats.free_disk_space <= stats.total_disk_space and stats.total_disk_space > 0

    b.session.close()
    assert R.STATS.decode(2, a.ok("system.stats")).clients_count == 1


@pytest.mark.parametrize("dialect", [1, 2, 3])
def test_messages_key_partitioning_follows_each_generation(broker, dialect):
    """iggy.md 3.3 (1-based, 0 -> n) for the seed era; XXH32 % n, 0-based, later."""
    c = logged_in(broker, dialect)
    c.ok("stream.create", name="s")
    c.ok("topic.create", stream_id="s", partitions_count=3, name="t")
    for key in (b"a", b"b", b"c", b"order-17"):
        before = [broker.partition("s", "t", p).next_offset for p in range(3)]
        c.ok("message.send", stream_id="s", topic_id="t", partitioning=PartitioningValue(3, key),
             messages=(WireMessage(0, b"x", b"", 1),))
        after = [broker.partition("s", "t", p).next_offset for p in range(3)]
        [pid] = [p for p in range(3) if after[p] != before[p]]
        h = xxhash.xxh32_intdigest(key) % 3
        assert pid == ((h or 3) - 1 if dialect == 1 else h)


def test_describe_options_lists_what_create_topic_applies(broker):
    c = logged_in(broker, 3)
    body = c.ok("system.describe_options", scope=1)
    (n,) = struct.unpack_from("<I", body)
    pos, specs = 4, {}
    for _ in range(n):
        spec, pos = R.OPTION_SPEC.decode(3, body, pos, exact=False)
        specs[spec.key] = (spec.kind, spec.default_value)
    assert pos == len(body)
    never = (HeaderKind.UINT64, b"\xff" * 8)
    assert specs == {"compression_algorithm": (HeaderKind.STRING, b"none"), "message_expiry": never,
                     "max_topic_size": never, "segment_size": (HeaderKind.UINT64, (256 << 20).to_bytes(8, "little")),
                     "enforce_fsync": (HeaderKind.BOOL, b"\x01"),  # the broker's (batch) fsyncs
                     "messages_required_to_save": (HeaderKind.UINT32, (1024).to_bytes(4, "little")),
                     "size_of_messages_required_to_save": (HeaderKind.UINT64, (1 << 20).to_bytes(8, "little")),
                     "preallocate_segments": (HeaderKind.BOOL, b"\x00")}  # tests/iggy/test_iggy_topic_options.py
    assert c.ok("system.describe_options", scope=2) == c.ok("system.describe_options", scope=3) == b"\0\0\0\0"
    assert c.call("system.describe_options", scope=9)[0] == E.INVALID_COMMAND


@pytest.mark.parametrize("dialect,status", [(1, E.INVALID_COMMAND), (2, E.INVALID_PARTITIONS_COUNT),
                                            (3, E.INVALID_PARTITIONS_COUNT), (4, E.INVALID_PARTITIONS_COUNT)])
def test_partition_counts_out_of_range(broker, dialect, status):
    c = logged_in(broker, dialect)
    c.ok("stream.create", name="s")
    c.ok("topic.create", stream_id="s", partitions_count=2, name="t")
    assert c.call("partition.delete", stream_id="s", topic_id="t", partitions_count=3)[0] == status
    zero = E.TOO_MANY_PARTITIONS if dialect == 3 else status  # the current server's pre-consensus check
    assert c.call("partition.create", stream_id="s", topic_id="t", partitions_count=0)[0] == zero
    assert c.call("partition.delete", stream_id="s", topic_id="t", partitions_count=0)[0] == zero
    assert c.call("partition.delete", stream_id="s", topic_id="t", partitions_count=2)[0] == 0  # all of them
    assert broker.get_topic("s", "t").partitions_count == 0


@pytest.mark.parametrize("dialect", [1, 4, 5])
def test_a_bad_seed_header_map_is_refused_and_nothing_is_stored(broker, dialect):
    """Dialects 1, 4 and 5 carry the seed-era map (iggy.md 3.5): each malformed block
    gets its status and stores nothing; a good one in the same batch is not stored either."""
    c = logged_in(broker, dialect)
    c.ok("stream.create", name="s")
    c.ok("topic.create", stream_id="s", partitions_count=1, name="t")
    good = Headers([("k", HeaderValue.string("v"))]).encode_legacy()
    pid = struct.pack("<I", 1 if dialect in ONE_BASED else 0)
    cases = [(good[:-1], E.INVALID_COMMAND),                               # the value runs past the block
             (good[:5] + b"\x63" + good[6:], E.INVALID_HEADER_KIND)]       # kind 99
    for block, status in cases:
        msgs = (WireMessage(0, b"ok", good), WireMessage(0, b"bad", block))
        got = c.call("message.send", stream_id="s", topic_id="t", partitioning=PartitioningValue(2, pid),
                     messages=msgs)
        assert got[0] == status, (block, got)
    assert broker.partition("s", "t", 0).next_offset == 0
