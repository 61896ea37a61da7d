"""The segment-store session (sans-I/O) over a real Broker in a tmp dir.

Commands go through the real codec both ways: each request is encoded and fed
to a :class:`FrameDecoder` whose output the session handles, and what the
session emits is decoded again. No flusher runs: ``broker.flush()`` makes the
appends durable and fires their ``on_durable`` callbacks synchronously, so a
test sees exactly when ``DataAppended`` leaves (pravega.md section 5.4).
"""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.pravega import commands as C
from adapters.pravega.codec import NEED_DATA, FrameDecoder, event_frame
from adapters.pravega.errors import PravegaProtocolError
from adapters.pravega.session import NULL_EVENT_NUMBER, Park, SegmentStoreSession
from adapters.pravega.types import TableEntry, TableKey
from core.broker import Broker, BrokerConfig
from core.log import AppendInput, LogConfig

SEG = "sc/st/0.#epoch.0"
SEG1 = "sc/st/1.#epoch.0"
TABLE = "sc/rg_kvtable/0.#epoch.0"
W = uuid.UUID(int=0x1234)
NO_VERSION = -(1 << 63)


def open_broker(path):
    return Broker.open(path, BrokerConfig(log=LogConfig(fsync="always")))


@pytest.fixture
def data_dir(tmp_path):
    return tmp_path / "data"


@pytest.fixture
def broker(data_dir):
    b = open_broker(data_dir)
    b.create_stream("sc")
    b.create_topic("sc", "st", 2)
    yield b
    b.close()


def decode_all(data: bytes) -> list:
    dec = FrameDecoder()
    dec.receive_data(data)
    out = []
    while (cmd := dec.next_event()) is not NEED_DATA:
        out.append(cmd)
    return out


class Client:
    """One connection: encodes requests, feeds them through the codec to the session,
    decodes what it emits."""

    def __init__(self, broker, hello: bool = True) -> None:
        self.broker = broker
        self.out = bytearray()
        self.session = SegmentStoreSession(broker, emit=self.out.extend, clock_ms=lambda: 1234)
        self.decoder = FrameDecoder()
        if hello:
            assert self.call(C.Hello(high_version=15, low_version=5)) == [C.Hello(15, 5)]

    def send(self, *cmds) -> Park | None:
        park = None
        for cmd in cmds:
            self.decoder.receive_data(C.encode(cmd))
            while (ev := self.decoder.next_event()) is not NEED_DATA:
                park = self.session.handle(ev) or park
        return park

    def replies(self) -> list:
        got = decode_all(bytes(self.out))
        self.out.clear()
        return got

    def call(self, *cmds) -> list:
        self.send(*cmds)
        return self.replies()

    def one(self, cmd):
        (reply,) = self.call(cmd)
        return reply

    def setup(self, writer=W, segment=SEG, rid=1):
        reply = self.one(C.SetupAppend(request_id=rid, writer_id=writer, segment=segment, delegation_token=""))
        assert isinstance(reply, C.AppendSetup), reply
        assert (reply.request_id, reply.segment, reply.writer_id) == (rid, segment, writer)
        return reply.last_event_number

    def append(self, events, last, writer=W, rid=10, data=None, num=None):
        data = b"".join(map(event_frame, events)) if data is None else data
        return self.send(C.AppendBlockEnd(writer_id=writer, size_of_whole_events=len(data), data=data,
                                          num_events=len(events) if num is None else num,
                                          last_event_number=last, request_id=rid))

    def read(self, offset, segment=SEG, length=1 << 20, rid=5):
        return C.ReadSegment(segment=segment, offset=offset, suggested_length=length, delegation_token="",
                             request_id=rid)


def stored(broker, pid=0, topic="st") -> list[bytes]:
    batch = broker.read("sc", topic, pid, 0, 1 << 20)
    return [bytes(rv.payload) for rv in batch.records()]


def frames(*payloads: bytes) -> bytes:
    return b"".join(map(event_frame, payloads))


# -- handshake and liveness ------------------------------------------------------------------
@pytest.mark.parametrize("high,low", [(15, 5), (17, 5), (15, 15), (5, 1), (100, 0)])
def test_hello_with_overlapping_versions_is_answered_15_5(broker, high, low):
    c = Client(broker, hello=False)
    assert c.call(C.Hello(high_version=high, low_version=low)) == [C.Hello(high_version=15, low_version=5)]


@pytest.mark.parametrize("high,low", [(17, 16), (4, 1)])
def test_hello_without_overlap_is_answered_then_closed(broker, high, low):
    c = Client(broker, hello=False)
    with pytest.raises(PravegaProtocolError, match="do not overlap"):
        c.send(C.Hello(high_version=high, low_version=low))
    assert c.replies() == [C.Hello(high_version=15, low_version=5)]


def test_keepalive_is_echoed(broker):
    assert Client(broker).call(C.KeepAlive(), C.KeepAlive()) == [C.KeepAlive(), C.KeepAlive()]


# -- SetupAppend -----------------------------------------------------------------------------
@pytest.mark.parametrize("segment", ["nope/st/0.#epoch.0", "sc/nope/0.#epoch.0", "sc/st/2.#epoch.0",
                                     "sc/st/0.#epoch.1", "sc/st/x.#epoch.0", "no-slashes", "sc/st/0/extra"])
def test_setup_append_on_a_missing_segment_is_no_such_segment(broker, segment):
    c = Client(broker)
    reply = c.one(C.SetupAppend(request_id=77, writer_id=W, segment=segment, delegation_token=""))
    assert reply == C.NoSuchSegment(request_id=77, segment=segment, server_stack_trace="", offset=-1)
    assert c.one(C.KeepAlive()) == C.KeepAlive()  # still usable


def test_setup_append_on_a_sealed_topic_is_segment_is_sealed(broker):
    broker.topic_state.seal_topic("sc", "st")
    reply = Client(broker).one(C.SetupAppend(request_id=3, writer_id=W, segment=SEG, delegation_token=""))
    assert isinstance(reply, C.SegmentIsSealed) and (reply.request_id, reply.segment) == (3, SEG)


def test_last_event_number_is_null_then_stored_then_survives_a_reopen(broker, data_dir):
    c = Client(broker)
    assert c.setup() == NULL_EVENT_NUMBER == -(1 << 63)
    c.append([b"a", b"b"], last=2)
    c.append([b"c"], last=5)  # gaps are legal
    broker.flush()
    assert Client(broker).setup() == 5
    assert Client(broker).setup(writer=uuid.UUID(int=9)) == NULL_EVENT_NUMBER  # per writer
    assert Client(broker).setup(segment=SEG1) == NULL_EVENT_NUMBER  # per segment
    broker.close()
    again = open_broker(data_dir)
    try:
        assert Client(again).setup() == 5
        assert stored(again) == [b"a", b"b", b"c"]
    finally:
        again.close()


def test_append_before_setup_is_a_protocol_error_and_stores_nothing(broker):
    c = Client(broker)
    with pytest.raises(PravegaProtocolError, match="before SetupAppend"):
        c.append([b"x"], last=1)
    broker.flush()
    assert stored(broker) == [] and c.replies() == []


# -- appends and acknowledgements -------------------------------------------------------------
def test_data_appended_only_after_durability_in_order_and_chained(broker):
    c = Client(broker)
    c.setup()
    c.append([b"one", b"two"], last=2, rid=11)
    c.append([b"three"], last=3, rid=12)
    assert c.replies() == []  # stored, not yet durable: nothing acknowledged
    assert c.session.unacked_bytes == len(frames(b"one", b"two", b"three"))
    broker.flush()
    acks = c.replies()
    assert [(a.event_number, a.previous_event_number, a.request_id) for a in acks] == [
        (2, NULL_EVENT_NUMBER, 11), (3, 2, 12)]
    assert all(a.writer_id == W for a in acks)
    assert acks[-1].current_segment_write_offset == len(frames(b"one", b"two", b"three"))
    assert c.session.unacked_bytes == 0
    assert stored(broker) == [b"one", b"two", b"three"]


def test_each_ack_carries_the_length_right_after_its_own_block(broker):
    c = Client(broker)
    c.setup()
    c.append([b"aaaa"], last=1, rid=1)
    c.append([b"bb", b"c"], last=3, rid=2)
    broker.flush()
    assert [a.current_segment_write_offset for a in c.replies()] == [12, 12 + 10 + 9]


def test_a_duplicate_block_is_acknowledged_and_not_stored(filled):
    d = Client(filled)  # a reconnect that resends what was already stored
    assert d.setup() == 3
    d.append([b"world!", b"x"], last=3, rid=20)
    d.append([b"hello"], last=1, rid=21)
    filled.flush()
    assert [(a.request_id, a.event_number) for a in d.replies()] == [(20, 3), (21, 1)]
    assert stored(filled) == [b"hello", b"world!", b"x"]


def test_a_block_straddling_the_stored_number_closes_and_stores_nothing(broker):
    c = Client(broker)
    c.setup()
    c.append([b"a", b"b"], last=2)
    broker.flush()
    c.replies()
    with pytest.raises(PravegaProtocolError, match="straddles"):
        c.append([b"b", b"c"], last=3)  # numbers 2..3 against stored 2
    broker.flush()
    assert stored(broker) == [b"a", b"b"] and c.replies() == [] and c.session.unacked_bytes == 0


@pytest.mark.parametrize("data,num,error_reply", [
    (frames(b"a", b"b"), 3, False),
    (frames(b"a"), 0, False),
    (frames(b"a") + C.HEADER.pack(1, 1) + b"b", 2, True),  # inner frame type 1, not 0
    (frames(b"a") + C.HEADER.pack(0, 5) + b"b", 2, True),  # event cut short
    (frames(b"a") + b"\x00\x00", 2, True),  # partial header
], ids=["count-mismatch", "zero-events", "bad-type", "cut-short", "partial-header"])
def test_a_malformed_block_is_an_error_and_stores_nothing(broker, data, num, error_reply):
    c = Client(broker)
    c.setup()
    with pytest.raises(PravegaProtocolError):
        c.append([], last=2, data=data, num=num)
    broker.flush()
    assert stored(broker) == []
    replies = c.replies()
    if error_reply:  # the ErrorMessage first, then the close (pravega.md section 12)
        assert [type(r) for r in replies] == [C.ErrorMessage] and replies[0].request_id == 10
    else:
        assert replies == []


def test_an_append_to_a_topic_sealed_after_setup_is_segment_is_sealed(broker):
    c = Client(broker)
    c.setup()
    broker.topic_state.seal_topic("sc", "st")
    c.append([b"x"], last=1, rid=4)
    (reply,) = c.replies()
    assert isinstance(reply, C.SegmentIsSealed) and (reply.request_id, reply.offset) == (4, 1)
    with pytest.raises(PravegaProtocolError):  # the writer was dropped: it must set up again
        c.append([b"y"], last=2)


@pytest.mark.parametrize("cmd", [
    C.AppendBlockEnd(writer_id=W, size_of_whole_events=9, data=event_frame(b"x"), num_events=1, last_event_number=1,
                     request_id=4),
    C.ConditionalAppend(writer_id=W, event_number=1, expected_offset=0, event=b"x", request_id=4),
    C.ConditionalBlockEnd(writer_id=W, event_number=1, expected_offset=0, data=b"x", request_id=4),
], ids=lambda c: type(c).__name__)
def test_a_write_after_another_protocol_deleted_the_topic_is_no_such_segment(broker, cmd):
    c = Client(broker)
    c.setup()
    broker.delete_topic("sc", "st")  # Iggy or HTTP may delete an unsealed topic
    (reply,) = c.call(cmd)
    assert isinstance(reply, C.NoSuchSegment) and (reply.request_id, reply.segment) == (4, SEG)
    with pytest.raises(PravegaProtocolError, match="before SetupAppend"):
        c.send(cmd)


def test_conditional_append_success_and_check_failed(broker):
    c = Client(broker)
    c.setup()
    c.send(C.ConditionalAppend(writer_id=W, event_number=1, expected_offset=0, event=b"first", request_id=8))
    broker.flush()
    (ok,) = c.replies()
    assert isinstance(ok, C.DataAppended) and ok.current_segment_write_offset == 13
    failed = c.one(C.ConditionalAppend(writer_id=W, event_number=2, expected_offset=0, event=b"x", request_id=9))
    assert failed == C.ConditionalCheckFailed(writer_id=W, event_number=2, request_id=9)
    c.send(C.ConditionalAppend(writer_id=W, event_number=2, expected_offset=13, event=b"second", request_id=10))
    broker.flush()
    assert [r.request_id for r in c.replies()] == [10]  # the connection stayed usable
    assert stored(broker) == [b"first", b"second"]


def test_a_large_event_in_parts_is_merged_as_one_event(broker):
    c = Client(broker)
    w = uuid.uuid4()
    made = c.one(C.CreateTransientSegment(request_id=1, writer_id=w, parent_segment=SEG, delegation_token=""))
    assert isinstance(made, C.SegmentCreated) and made.segment.startswith(SEG + "#transient." + w.hex + ".")
    assert c.setup(writer=w, segment=made.segment) == NULL_EVENT_NUMBER
    frame = event_frame(b"L" * 100)
    for n, at in enumerate((0, 60)):  # the Rust client numbers the parts from 0
        part = C.ConditionalBlockEnd(writer_id=w, event_number=n, expected_offset=at, data=frame[at:at + 60],
                                     request_id=3 + n)
        assert c.one(part).current_segment_write_offset == min(at + 60, len(frame))
    c.send(C.MergeSegments(request_id=5, target=SEG, source=made.segment, delegation_token=""))
    broker.flush()
    assert c.replies() == [C.SegmentsMerged(request_id=5, target=SEG, source=made.segment,
                                            new_target_write_offset=len(frame))]
    assert stored(broker) == [b"L" * 100]


def test_transient_segments_not_merged_are_dropped_with_their_connection(broker):
    c = Client(broker)
    made = c.one(C.CreateTransientSegment(request_id=1, writer_id=W, parent_segment=SEG, delegation_token=""))
    c.setup(segment=made.segment)
    c.send(C.ConditionalBlockEnd(writer_id=W, event_number=0, expected_offset=0, data=b"x" * 1000, request_id=2))
    assert made.segment in c.session.state.transients
    c.session.close()  # the client vanished before MergeSegments
    assert c.session.state.transients == {}


def test_unmerged_large_events_per_connection_are_bounded(broker):
    from adapters.pravega.session import MAX_TRANSIENTS
    c = Client(broker)
    for rid in range(MAX_TRANSIENTS):
        assert isinstance(c.one(C.CreateTransientSegment(request_id=rid, writer_id=W, parent_segment=SEG,
                                                         delegation_token="")), C.SegmentCreated)
    refused = c.one(C.CreateTransientSegment(request_id=99, writer_id=W, parent_segment=SEG, delegation_token=""))
    assert isinstance(refused, C.ErrorMessage) and refused.request_id == 99
    assert len(c.session.state.transients) == MAX_TRANSIENTS


# -- reads ---------------------------------------------------------------------------------------
@pytest.fixture
def filled(broker):
    """Events b"hello" (0..13), b"world!" (13..27), b"x" (27..36) in segment 0, durable."""
    c = Client(broker)
    c.setup()
    c.append([b"hello", b"world!", b"x"], last=3)
    broker.flush()
    return broker


@pytest.mark.parametrize("offset,length", [(0, 100), (0, 13), (3, 100), (13, 8), (20, 3), (35, 100)])
def test_read_returns_the_byte_view_from_any_offset(filled, offset, length):
    view = frames(b"hello", b"world!", b"x")
    c = Client(filled)
    reply = c.one(c.read(offset, length=length))
    assert isinstance(reply, C.SegmentRead), reply
    want = view[offset:offset + max(length, 8)]
    assert (reply.segment, reply.offset, reply.data, reply.request_id) == (SEG, offset, want, 5)
    assert reply.at_tail == (offset + len(want) == len(view)) and not reply.end_of_segment


def test_a_read_at_the_tail_parks_then_answers_empty_at_tail(filled):
    c = Client(filled)
    park = c.send(c.read(36))
    assert isinstance(park, Park) and c.replies() == []
    topic = filled.get_topic("sc", "st")
    assert park.key == (topic.stream_id, topic.id, 0)
    assert c.session.read(park.cmd, parked=True) is None
    assert c.replies() == [C.SegmentRead(segment=SEG, offset=36, at_tail=True, end_of_segment=False, data=b"",
                                         request_id=5)]


def test_a_parked_read_after_an_append_answers_the_new_data_once_durable(filled):
    c = Client(filled)
    park = c.send(c.read(36))
    filled.append("sc", "st", [AppendInput(b"late")], partition=0)
    assert isinstance(c.send(c.read(36)), Park) and c.replies() == []  # not durable yet: issue 30
    info = c.one(C.GetStreamSegmentInfo(request_id=2, segment_name=SEG, delegation_token=""))
    assert info.write_offset == 36  # the length readers may read to
    filled.flush()
    c.session.read(park.cmd, parked=True)
    (reply,) = c.replies()
    assert reply.data == event_frame(b"late") and reply.at_tail


def test_a_read_below_the_truncation_point_is_segment_is_truncated(filled):
    filled.topic_state.truncate_partition("sc", "st", 0, 13)
    c = Client(filled)
    reply = c.one(c.read(12))
    assert isinstance(reply, C.SegmentIsTruncated)
    assert (reply.request_id, reply.segment, reply.start_offset) == (5, SEG, 13)
    assert c.one(c.read(13)).data[8:14] == b"world!"


def test_a_sealed_segment_read_to_its_end_says_end_of_segment(filled):
    filled.topic_state.seal_topic("sc", "st")
    c = Client(filled)
    last = c.one(c.read(27))
    assert last.at_tail and last.end_of_segment and last.data == event_frame(b"x")
    end = c.one(c.read(36))
    assert (end.at_tail, end.end_of_segment, end.data) == (True, True, b"")
    assert not c.one(c.read(0, length=8)).end_of_segment


def test_a_read_of_a_missing_segment_is_no_such_segment(broker):
    c = Client(broker)
    assert isinstance(c.one(c.read(0, segment="sc/st/9.#epoch.0")), C.NoSuchSegment)


def test_messages_from_other_protocols_read_as_payload_only_frames(broker):
    payloads = [b"nats", b"", b"iggy" * 100]
    for p in payloads:
        broker.append("sc", "st", [AppendInput(p, b"\x00\x01hdr-block")], partition=1)
    broker.flush()  # readers see durable records only (issue 30)
    c = Client(broker)
    view = frames(*payloads)
    assert c.one(c.read(0, segment=SEG1)).data == view
    second = len(event_frame(payloads[0]))
    assert c.one(c.read(second + 3, segment=SEG1)).data == view[second + 3:]
    info = c.one(C.GetStreamSegmentInfo(request_id=2, segment_name=SEG1, delegation_token=""))
    assert info.write_offset == len(view)


def test_get_stream_segment_info(filled):
    filled.topic_state.truncate_partition("sc", "st", 0, 13)
    c = Client(filled)
    info = c.one(C.GetStreamSegmentInfo(request_id=6, segment_name=SEG, delegation_token=""))
    assert info == C.StreamSegmentInfo(request_id=6, segment_name=SEG, exists=True, is_sealed=False,
                                       is_deleted=False, last_modified=1234, write_offset=36, start_offset=13)
    filled.topic_state.seal_topic("sc", "st")
    assert c.one(C.GetStreamSegmentInfo(request_id=7, segment_name=SEG, delegation_token="")).is_sealed
    missing = c.one(C.GetStreamSegmentInfo(request_id=8, segment_name="sc/zz/0", delegation_token=""))
    assert isinstance(missing, C.NoSuchSegment) and missing.request_id == 8


# -- table segments ------------------------------------------------------------------------------
def _update(rid, *entries, seg=TABLE):
    return C.UpdateTableEntries(request_id=rid, segment=seg, delegation_token="",
                                entries=tuple(TableEntry(k, v, val) for k, v, val in entries))


def test_table_create_twice_update_read_remove_delete(broker):
    c = Client(broker)
    create = C.CreateTableSegment(request_id=1, segment=TABLE, delegation_token="")
    assert c.one(create) == C.SegmentCreated(request_id=1, segment=TABLE)
    assert c.one(create) == C.SegmentAlreadyExists(request_id=1, segment=TABLE, server_stack_trace="")
    done = c.one(_update(2, (b"k1", NO_VERSION, b"v1"), (b"k2", -1, b"v2")))
    assert done == C.TableEntriesUpdated(request_id=2, updated_versions=(0, 1))
    bad = c.one(_update(3, (b"k1", 7, b"nope"), (b"k3", -1, b"new")))
    assert bad == C.TableKeyBadVersion(request_id=3, segment=TABLE, server_stack_trace="")
    assert c.one(_update(4, (b"k1", 0, b"v1b"))).updated_versions == (2,)
    read = c.one(C.ReadTable(request_id=5, segment=TABLE, delegation_token="",
                             keys=(TableKey(b"k1", NO_VERSION), TableKey(b"k3", NO_VERSION))))
    assert read.entries == (TableEntry(b"k1", 2, b"v1b"), TableEntry(b"k3", -1, b""))  # nothing of request 3
    delta = c.one(C.ReadTableEntriesDelta(request_id=6, segment=TABLE, delegation_token="", from_position=0,
                                          suggested_entry_count=10))
    assert delta.entries == (TableEntry(b"k2", 1, b"v2"), TableEntry(b"k1", 2, b"v1b"))
    assert (delta.last_position, delta.reached_end, delta.should_clear) == (3, True, False)
    later = c.one(C.ReadTableEntriesDelta(request_id=7, segment=TABLE, delegation_token="", from_position=2,
                                          suggested_entry_count=10))
    assert later.entries == (TableEntry(b"k1", 2, b"v1b"),)
    drop = C.DeleteTableSegment(request_id=8, segment=TABLE, must_be_empty=True, delegation_token="")
    assert c.one(drop) == C.TableSegmentNotEmpty(request_id=8, segment=TABLE, server_stack_trace="")
    remove = C.RemoveTableKeys(request_id=9, segment=TABLE, delegation_token="",
                               keys=(TableKey(b"k1", 2), TableKey(b"k2", NO_VERSION)))
    assert c.one(remove) == C.TableKeysRemoved(request_id=9, segment=TABLE)
    assert c.one(drop) == C.SegmentDeleted(request_id=8, segment=TABLE)
    assert isinstance(c.one(_update(10, (b"k", NO_VERSION, b"v"))), C.NoSuchSegment)


def test_table_entries_and_keys_page_with_their_continuation_token(broker):
    c = Client(broker)
    c.one(C.CreateTableSegment(request_id=1, segment=TABLE, delegation_token=""))
    c.one(_update(2, *[(b"k%d" % i, NO_VERSION, b"v%d" % i) for i in range(5)]))
    seen, token = [], b""
    for rid in range(3, 10):
        page = c.one(C.ReadTableEntries(request_id=rid, segment=TABLE, delegation_token="", suggested_entry_count=2,
                                        continuation_token=token))
        if not page.entries:
            break
        seen += [e.key for e in page.entries]
        token = page.continuation_token
    assert seen == [b"k%d" % i for i in range(5)]
    keys = c.one(C.ReadTableKeys(request_id=20, segment=TABLE, delegation_token="", suggested_key_count=10,
                                 continuation_token=b"k2"))
    assert [(k.key, k.version) for k in keys.keys] == [(b"k3", 3), (b"k4", 4)]
    info = c.one(C.GetTableSegmentInfo(request_id=21, segment_name=TABLE, delegation_token=""))
    assert (info.length, info.entry_count) == (5, 5)


def test_table_commands_on_a_non_table_segment_are_no_such_segment(broker):
    c = Client(broker)
    reply = c.one(C.CreateTableSegment(request_id=4, segment=SEG, delegation_token=""))
    assert reply == C.NoSuchSegment(request_id=4, segment=SEG, server_stack_trace="", offset=-1)


# -- unsupported ------------------------------------------------------------------------------
@pytest.mark.parametrize("cmd", [
    C.CreateSegment(request_id=41, segment=SEG, target_rate=0, scale_type=0, delegation_token=""),
    C.DeleteSegment(request_id=41, segment=SEG, delegation_token=""),
    C.UpdateSegmentPolicy(request_id=41, segment=SEG, target_rate=0, scale_type=0, delegation_token=""),
    C.UpdateSegmentAttribute(request_id=41, segment_name=SEG, attribute_id=W, new_value=1, expected_value=0,
                             delegation_token=""),
    C.LocateOffset(request_id=41, segment=SEG, target_offset=0, delegation_token=""),
    C.MergeSegmentsBatch(request_id=41, target=SEG, sources=(SEG1,), delegation_token=""),
    C.FlushToStorage(container_id=0, delegation_token="", request_id=41),
    C.ListStorageChunks(segment=SEG, delegation_token="", request_id=41),
    C.DataAppended(writer_id=W, event_number=1, request_id=41),  # a reply sent by a client
], ids=lambda c: type(c).__name__)
def test_unknown_and_admin_commands_are_operation_unsupported(broker, cmd):
    c = Client(broker)
    reply = c.one(cmd)
    assert isinstance(reply, C.OperationUnsupported) and reply.request_id == 41
    assert c.one(C.KeepAlive()) == C.KeepAlive()


def test_seal_of_one_segment_of_several_is_unsupported(broker):
    reply = Client(broker).one(C.SealSegment(request_id=2, segment=SEG, delegation_token=""))
    assert isinstance(reply, C.OperationUnsupported) and reply.request_id == 2
    assert not broker.get_topic("sc", "st").sealed


# -- dedup, property-based ---------------------------------------------------------------------
ops = st.lists(st.one_of(
    st.tuples(st.just("append"), st.integers(min_value=1, max_value=4)),
    st.tuples(st.just("reconnect"), st.none()),
    st.tuples(st.just("resend"), st.integers(min_value=0, max_value=3)),
    st.tuples(st.just("flush"), st.none()),
), max_size=25)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=ops)
def test_reconnects_and_resends_store_every_event_number_once_in_order(tmp_path_factory, steps):
    """A writer that numbers consecutively, reconnects at random (resuming after the number
    AppendSetup gives it, as the client does) and resends old blocks: the partition holds each
    event number exactly once, in order."""
    b = open_broker(tmp_path_factory.mktemp("dedup"))
    try:
        b.create_stream("sc")
        b.create_topic("sc", "st", 1)
        c = Client(b)
        assert c.setup() == NULL_EVENT_NUMBER
        next_number = 1
        sent: list[tuple[int, int]] = []  # (first, last) of each block sent
        for op, arg in steps:
            if op == "append":
                first, last = next_number, next_number + arg - 1
                c.append([b"e%d" % n for n in range(first, last + 1)], last=last)
                sent.append((first, last))
                next_number = last + 1
            elif op == "reconnect":  # blocks may still be pending: the new setup sees them
                c = Client(b)
                resume = c.setup()
                next_number = 1 if resume == NULL_EVENT_NUMBER else resume + 1
            elif op == "resend" and sent:
                first, last = sent[-1 - min(arg, len(sent) - 1)]
                c.append([b"e%d" % n for n in range(first, last + 1)], last=last)
            else:
                b.flush()
        b.flush()
        want = [b"e%d" % n for n in range(1, next_number)]
        assert stored(b) == want
    finally:
        b.close()


@pytest.mark.parametrize("read", ["delta", "entries"])
def test_table_reads_fit_in_one_frame_whatever_the_values(broker, read):
    c = Client(broker)
    c.one(C.CreateTableSegment(request_id=1, segment=TABLE, delegation_token=""))
    big = b"v" * (1 << 20)  # upstream's largest entry
    for part in range(2):
        c.one(_update(2, *[(b"k%02d" % (10 * part + i), NO_VERSION, big) for i in range(10)]))
    if read == "delta":
        cmd = C.ReadTableEntriesDelta(request_id=3, segment=TABLE, delegation_token="", from_position=0,
                                      suggested_entry_count=1000)
    else:
        cmd = C.ReadTableEntries(request_id=3, segment=TABLE, delegation_token="", suggested_entry_count=1000,
                                 continuation_token=b"")
    reply = c.one(cmd)  # decoding checks the frame limit a client's decoder has
    assert 0 < len(reply.entries) < 20 and all(e.value == big for e in reply.entries)


def test_writers_per_connection_are_bounded(broker, monkeypatch):
    import adapters.pravega.session as session_module
    monkeypatch.setattr(session_module, "MAX_WRITERS", 3)
    c = Client(broker)
    for _ in range(3):
        assert c.setup(writer=uuid.uuid4()) == NULL_EVENT_NUMBER
    refused = c.one(C.SetupAppend(request_id=77, writer_id=uuid.uuid4(), segment=SEG, delegation_token=""))
    assert isinstance(refused, C.ErrorMessage) and refused.request_id == 77
    assert len(c.session.writers) == 3
