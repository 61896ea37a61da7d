"""The controller's RPCs (ControllerService) over a real Broker, without HTTP/2.

Requests are encoded with the ``controller_proto`` classes and dispatched as
:class:`UnaryCall` objects to a fake connection that keeps what ``reply`` and
``fail`` were given; replies are decoded with the RPC's response class.
"""

from __future__ import annotations

import time
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.pravega import commands as C
from adapters.pravega import controller_proto as P
from adapters.pravega.codec import NEED_DATA, Append, FrameDecoder, event_frame
from adapters.pravega.controller import LIST_PAGE, ControllerService, txn_id_of, uuid_of
from adapters.pravega.grpc import GrpcStatus, UnaryCall
from adapters.pravega.session import SegmentStoreSession
from adapters.pravega.state import state_of
from core.broker import Broker, BrokerConfig
from core.log import AppendInput, LogConfig

Status = GrpcStatus


class FakeConn:
    """What ControllerService.dispatch answers through: a reply body or a failure per stream."""

    def __init__(self) -> None:
        self.answers: dict[int, tuple] = {}

    def reply(self, stream_id: int, body: bytes) -> None:
        self.answers[stream_id] = ("ok", body)

    def fail(self, stream_id: int, status: GrpcStatus, message: str = "") -> None:
        self.answers[stream_id] = ("fail", status, message)


class Failed(Exception):
    def __init__(self, status, message) -> None:
        super().__init__(f"{status!r}: {message}")
        self.status, self.message = status, message


class Controller:
    def __init__(self, broker) -> None:
        self.now = 1_000_000
        self.service = ControllerService(broker, clock_ms=lambda: self.now)
        self.conn = FakeConn()
        self._sid = 1

    def raw(self, method: str, body: bytes, service: str = P.SERVICE) -> tuple:
        sid, self._sid = self._sid, self._sid + 2
        self.service.dispatch(self.conn, UnaryCall(sid, service, method, body, ()))
        return self.conn.answers.pop(sid)

    def __call__(self, method: str, request):
        answer = self.raw(method, request.encode())
        if answer[0] == "fail":
            raise Failed(answer[1], answer[2])
        return P.RPCS[method][1].decode(answer[1])

    def fails(self, method: str, request) -> GrpcStatus:
        with pytest.raises(Failed) as info:
            self(method, request)
        return info.value.status


@pytest.fixture
def broker(tmp_path):
    b = Broker.open(tmp_path / "data", BrokerConfig(log=LogConfig(fsync="always")))
    yield b
    b.close()


@pytest.fixture
def ctl(broker):
    return Controller(broker)


def si(scope="sc", stream="st"):
    return P.StreamInfo(scope=scope, stream=stream)


def config(scope="sc", stream="st", segments=3, tags=()):
    return P.StreamConfig(stream_info=si(scope, stream), scaling_policy=P.ScalingPolicy(min_num_segments=segments),
                          tags=P.Tags(tag=tuple(tags)))


@pytest.fixture
def stream(ctl):
    assert ctl("createScope", P.ScopeInfo("sc")).status == P.CreateScopeStatus.Status.SUCCESS
    assert ctl("createStream", config()).status == P.CreateStreamStatus.Status.SUCCESS
    return ctl


# -- scopes and streams ----------------------------------------------------------------------
def test_create_scope_and_stream_then_exists(ctl, broker):
    CS, SS = P.CreateScopeStatus.Status, P.CreateStreamStatus.Status
    assert ctl("createScope", P.ScopeInfo("sc")).status == CS.SUCCESS
    assert ctl("createScope", P.ScopeInfo("sc")).status == CS.SCOPE_EXISTS
    assert ctl("checkScopeExists", P.ScopeInfo("sc")).exists
    assert not ctl("checkScopeExists", P.ScopeInfo("other")).exists
    assert ctl("createStream", config("nope")).status == SS.SCOPE_NOT_FOUND
    assert ctl("createStream", config(tags=["a", "b"])).status == SS.SUCCESS
    assert ctl("createStream", config()).status == SS.STREAM_EXISTS
    assert ctl("checkStreamExists", si()).exists and not ctl("checkStreamExists", si(stream="zz")).exists
    assert broker.get_topic("sc", "st").partitions_count == 3
    cfg = ctl("getStreamConfiguration", si())
    assert cfg.scaling_policy.min_num_segments == 3 and cfg.tags.tag == ("a", "b")


@pytest.mark.parametrize("method,request_,status", [
    ("createScope", P.ScopeInfo("bad name"), P.CreateScopeStatus.Status.INVALID_SCOPE_NAME),
    ("createScope", P.ScopeInfo(""), P.CreateScopeStatus.Status.INVALID_SCOPE_NAME),
    ("createScope", P.ScopeInfo("x" * 256), P.CreateScopeStatus.Status.INVALID_SCOPE_NAME),
    ("createStream", config(stream="st/1"), P.CreateStreamStatus.Status.INVALID_STREAM_NAME),
    ("createStream", config(stream="é"), P.CreateStreamStatus.Status.INVALID_STREAM_NAME),
    ("createStream", P.StreamConfig(), P.CreateStreamStatus.Status.INVALID_STREAM_NAME),
], ids=["space", "empty", "too-long", "slash", "non-ascii", "no-info"])
def test_bad_names_are_invalid(stream, method, request_, status):
    assert stream(method, request_).status == status


@pytest.mark.parametrize("segments,tags", [
    (2, ["t%03d" % i + "x" * 250 for i in range(600)]),  # ~150 KB of tags: over a topic attribute's limit
    (1001, []),  # over the core's partition limit
], ids=["huge-tags", "too-many-segments"])
def test_a_create_stream_that_fails_leaves_no_stream(stream, segments, tags):
    assert stream.fails("createStream", config(stream="big", segments=segments, tags=tags)) == Status.INVALID_ARGUMENT
    assert not stream("checkStreamExists", si(stream="big")).exists
    assert stream("createStream", config(stream="big", segments=2)).status == P.CreateStreamStatus.Status.SUCCESS


def test_listing_pages_with_continuation_tokens(ctl, broker):
    names = sorted(f"s{i:04d}" for i in range(LIST_PAGE + 7))
    for name in names:
        broker.create_stream(name)
    broker.create_stream("not_pravega")  # "_" is not in Pravega's alphabet: invisible
    got, token, pages = [], None, 0
    while True:
        reply = ctl("listScopes", P.ScopesRequest(continuation_token=token))
        pages += 1
        if not reply.scopes:
            break
        got += reply.scopes
        token = reply.continuation_token
    assert got == names and pages == 3
    for name in names[:LIST_PAGE + 3]:
        broker.create_topic("s0000", name, 1)
    streams, token = [], P.ContinuationToken(token="")
    while batch := ctl("listStreamsInScope", P.StreamsInScopeRequest(scope=P.ScopeInfo("s0000"),
                                                                        continuation_token=token)).streams:
        streams += [s.stream for s in batch]
        token = ctl("listStreamsInScope", P.StreamsInScopeRequest(scope=P.ScopeInfo("s0000"),
                                                                   continuation_token=token)).continuation_token
    assert streams == names[:LIST_PAGE + 3]
    missing = ctl("listStreamsInScope", P.StreamsInScopeRequest(scope=P.ScopeInfo("nope")))
    assert missing.status == P.StreamsInScopeResponse.Status.SCOPE_NOT_FOUND


@pytest.mark.parametrize("n", [1, 2, 3, 7, 10, 1000])
def test_current_segments_tile_the_key_space(ctl, broker, n):
    broker.create_stream("sc")
    broker.create_topic("sc", "st", n)
    ranges = ctl("getCurrentSegments", si()).segment_ranges
    assert [r.segment_id.segment_id for r in ranges] == list(range(n))
    assert all(r.segment_id.stream_info == si() for r in ranges)
    assert ranges[0].min_key == 0.0 and ranges[-1].max_key == 1.0
    assert all(a.max_key == b.min_key and a.min_key < a.max_key for a, b in zip(ranges, ranges[1:]))


def test_get_segments_at_the_head_and_at_a_time(stream, broker):
    broker.append("sc", "st", [AppendInput(b"early")], partition=0)
    broker.append("sc", "st", [AppendInput(b"p1")], partition=1)
    time.sleep(0.003)
    between = int(time.time() * 1000)
    time.sleep(0.003)
    broker.append("sc", "st", [AppendInput(b"late")], partition=0)
    broker.topic_state.truncate_partition("sc", "st", 1, 4)
    head = stream("getSegments", P.GetSegmentsRequest(stream_info=si(), timestamp=0))
    assert [(loc.segment_id.segment_id, loc.offset) for loc in head.segments] == [(0, 0), (1, 4), (2, 0)]
    at = stream("getSegments", P.GetSegmentsRequest(stream_info=si(), timestamp=between))
    assert [loc.offset for loc in at.segments] == [len(event_frame(b"early")), 10, 0]  # 1: nothing after: the end
    assert stream.fails("getSegments", P.GetSegmentsRequest(stream_info=si(stream="zz"))) == Status.NOT_FOUND


def test_get_uri_names_the_running_segment_store(stream, broker):
    seg = P.SegmentId(stream_info=si(), segment_id=0)
    assert stream.fails("getURI", seg) == Status.UNAVAILABLE
    state_of(broker).segment_store = ("ferry.example", 12345)
    assert stream("getURI", seg) == P.NodeUri(endpoint="ferry.example", port=12345)


def test_seal_then_delete_stream_then_scope(stream, broker):
    US, DS, DSc = P.UpdateStreamStatus.Status, P.DeleteStreamStatus.Status, P.DeleteScopeStatus.Status
    assert stream("deleteStream", si()).status == DS.STREAM_NOT_SEALED
    assert stream("deleteScope", P.ScopeInfo("sc")).status == DSc.SCOPE_NOT_EMPTY
    assert stream("sealStream", si()).status == US.SUCCESS
    assert stream("getCurrentSegments", si()).segment_ranges == ()
    assert stream("sealStream", si(stream="zz")).status == US.STREAM_NOT_FOUND
    assert stream("deleteStream", si()).status == DS.SUCCESS
    assert stream("deleteStream", si()).status == DS.STREAM_NOT_FOUND
    assert stream("deleteScope", P.ScopeInfo("sc")).status == DSc.SUCCESS
    assert stream("deleteScope", P.ScopeInfo("sc")).status == DSc.SCOPE_NOT_FOUND


def test_scaling_is_refused_with_final_answers(stream):
    assert stream("scale", P.ScaleRequest(stream_info=si())).status == P.ScaleResponse.ScaleStreamStatus.FAILURE
    assert stream.fails("updateStream", config(segments=4)) == Status.INVALID_ARGUMENT
    assert stream("updateStream", config(segments=3, tags=["x"])).status == P.UpdateStreamStatus.Status.SUCCESS


# -- dispatch errors ---------------------------------------------------------------------------
@pytest.mark.parametrize("service,method", [
    (P.SERVICE, "noSuchMethod"), ("other.Service", "createScope"), (P.SERVICE, "createReaderGroup"),
    (P.SERVICE, "listCompletedTransactions"), (P.SERVICE, "createKeyValueTable"),
])
def test_unknown_or_unserved_methods_are_unimplemented(ctl, service, method):
    assert ctl.raw(method, b"", service=service)[:2] == ("fail", Status.UNIMPLEMENTED)


@pytest.mark.parametrize("body", [b"\x0a\x05ab", b"\x08", b"\x0a\x02\xff\xfe", b"\x0f"],
                         ids=["short-string", "truncated-varint", "bad-utf8", "bad-wire-type"])
def test_a_malformed_body_is_invalid_argument_and_the_service_goes_on(ctl, body):
    assert ctl.raw("createScope", body)[:2] == ("fail", Status.INVALID_ARGUMENT)
    assert ctl("createScope", P.ScopeInfo("fine")).status == P.CreateScopeStatus.Status.SUCCESS


# -- transactions ------------------------------------------------------------------------------
def txn_segment(txn_id: P.TxnId, number: int = 0) -> str:
    return f"sc/st/{number}.#epoch.0#transaction.{uuid_of(txn_id).hex}"


def write_txn(broker, segment: str, payloads) -> list:
    out = bytearray()
    session = SegmentStoreSession(broker, emit=out.extend)
    writer = uuid.uuid4()
    session.handle(C.SetupAppend(request_id=1, writer_id=writer, segment=segment, delegation_token=""))
    data = b"".join(map(event_frame, payloads))
    session.handle(Append(writer, data, len(payloads), len(payloads), 2))
    dec = FrameDecoder()
    dec.receive_data(bytes(out))
    return list(iter(dec.next_event, NEED_DATA))


def txn_state(ctl, txn_id):
    return ctl("checkTransactionState", P.TxnRequest(stream_info=si(), txn_id=txn_id)).state


def test_transaction_commit_is_committing_then_committed_after_flush(stream, broker):
    S = P.TxnState.State
    created = stream("createTransaction", P.CreateTxnRequest(stream_info=si(), lease=30_000))
    assert created.txn_id.low_bits >= 0 and len(created.active_segments) == 3
    assert txn_state(stream, created.txn_id) == S.OPEN
    replies = write_txn(broker, txn_segment(created.txn_id, 1), [b"t1", b"t2"])
    assert [type(r) for r in replies] == [C.AppendSetup, C.DataAppended]
    assert list(broker.read("sc", "st", 1, 0, 10).records()) == []  # held until commit
    ping = stream("pingTransaction", P.PingTxnRequest(stream_info=si(), txn_id=created.txn_id, lease=30_000))
    assert ping.status == P.PingTxnStatus.Status.OK
    commit = stream("commitTransaction", P.TxnRequest(stream_info=si(), txn_id=created.txn_id))
    assert commit.status == P.TxnStatus.Status.SUCCESS
    assert txn_state(stream, created.txn_id) == S.COMMITTING
    broker.flush()
    assert txn_state(stream, created.txn_id) == S.COMMITTED
    assert [bytes(r.payload) for r in broker.read("sc", "st", 1, 0, 10).records()] == [b"t1", b"t2"]
    abort = stream("abortTransaction", P.TxnRequest(stream_info=si(), txn_id=created.txn_id))
    assert abort.status == P.TxnStatus.Status.FAILURE  # committed: too late


def test_transaction_abort_drops_the_events(stream, broker):
    created = stream("createTransaction", P.CreateTxnRequest(stream_info=si(), lease=0))
    write_txn(broker, txn_segment(created.txn_id), [b"gone"])
    assert stream("abortTransaction", P.TxnRequest(stream_info=si(), txn_id=created.txn_id)).status == 0
    assert txn_state(stream, created.txn_id) == P.TxnState.State.ABORTED
    commit = stream("commitTransaction", P.TxnRequest(stream_info=si(), txn_id=created.txn_id))
    assert commit.status == P.TxnStatus.Status.FAILURE
    broker.flush()
    assert list(broker.read("sc", "st", 0, 0, 10).records()) == []
    ping = stream("pingTransaction", P.PingTxnRequest(stream_info=si(), txn_id=created.txn_id, lease=1))
    assert ping.status == P.PingTxnStatus.Status.ABORTED


def test_unknown_transactions(stream):
    ghost = txn_id_of(uuid.UUID(int=12345))
    assert txn_state(stream, ghost) == P.TxnState.State.UNKNOWN
    assert txn_state(stream, None) == P.TxnState.State.UNKNOWN
    TS = P.TxnStatus.Status
    assert stream("commitTransaction", P.TxnRequest(stream_info=si(), txn_id=ghost)).status == TS.TRANSACTION_NOT_FOUND
    assert stream("abortTransaction", P.TxnRequest(stream_info=si(), txn_id=ghost)).status == TS.TRANSACTION_NOT_FOUND
    ping = stream("pingTransaction", P.PingTxnRequest(stream_info=si(), txn_id=ghost, lease=1))
    assert ping.status == P.PingTxnStatus.Status.UNKNOWN
    assert stream.fails("createTransaction", P.CreateTxnRequest(stream_info=si(stream="zz"))) == Status.NOT_FOUND


def test_a_lease_that_runs_out_aborts_the_transaction(stream):
    created = stream("createTransaction", P.CreateTxnRequest(stream_info=si(), lease=1_000))
    stream.now += 1_001
    assert txn_state(stream, created.txn_id) == P.TxnState.State.ABORTED


@given(st.integers(min_value=0, max_value=(1 << 128) - 1))
def test_txn_ids_round_trip_and_survive_the_rust_clients_cast(value):
    u = uuid.UUID(int=value & ~(1 << 63))  # what state.new_txn_id hands out
    tid = txn_id_of(u)
    assert uuid_of(tid) == u and tid.low_bits >= 0
    assert P.TxnId.decode(tid.encode()) == tid
    rust = ((tid.high_bits % (1 << 64)) << 64) | (tid.low_bits % (1 << 128))  # `low as u128` sign-extends
    assert rust == u.int
