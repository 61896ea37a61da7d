"""The Pravega controller's RPCs over Ferry's metadata: scopes, streams, segments, transactions.

Theory of operation
-------------------
:class:`ControllerService` answers one decoded gRPC call at a time
(:mod:`adapters.pravega.grpc` frames them; the messages are
:mod:`adapters.pravega.controller_proto`'s tables). Every RPC is a quick
synchronous call on the broker, so the driver serves it in the connection's
own task. The mapping (pravega.md section 12, docs/pravega.md):

* scope = Ferry stream, stream = Ferry topic (:mod:`core.addressing`'s one
  rule, bindings included), segment *n* = partition *n*; a stream of P
  segments covers the key space in P equal ranges ``[n/P, (n+1)/P)`` and the
  client hashes routing keys into them;
* streams have fixed segment counts: the scaling RPCs answer their failure
  status, segment ids are epoch 0, successors are always empty;
* names Pravega cannot express are refused with ``INVALID_*`` statuses.

Replies use the status enums of the reply messages wherever the proto has
one (the client maps them to its own errors: pravega-client.md section 4);
gRPC statuses only where it has none: NOT_FOUND / INVALID_ARGUMENT are
non-retryable in the 0.3.8 client, UNIMPLEMENTED for RPCs not served here.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from dataclasses import replace
from typing import Callable

from core.access import denied
from core.addressing import is_pravega_name
from core.errors import (
    FerryError,
    InvalidArgument,
    InvalidOffset,
    NotFound,
    StreamNotFound,
    TopicSealed,
)
from core.log.partition import AppendInput
from core.metrics import metrics_for
from core.model import TopicSettings
from core.permissions import Action

from . import controller_proto as P
from .auth import READ, TABLE_SUFFIX, WRITE, AuthError, Authenticator, table_reader
from .grpc import GrpcStatus
from .names import split_segment_id
from .protobuf import ProtobufError
from .state import TxnError, TxnState, state_of

log = logging.getLogger("ferry.pravega.controller")

LIST_PAGE = 200  # scopes/streams per listing reply; clients page with the continuation token
ATTR_TAGS = "pravega.tags"  # topic attribute: the stream's tags (JSON list)
ATTR_SCALING = "pravega.scaling"  # topic attribute: the scaling policy as created (JSON)
_US_PER_MS = 1000
_I64 = 1 << 64


class _Status(Exception):
    def __init__(self, code: GrpcStatus, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


def _signed(value: int) -> int:
    return value - _I64 if value >= 1 << 63 else value


def txn_id_of(u: uuid.UUID) -> P.TxnId:
    return P.TxnId(high_bits=_signed(u.int >> 64), low_bits=_signed(u.int & (_I64 - 1)))


def uuid_of(t: P.TxnId | None) -> uuid.UUID:
    if t is None:
        return uuid.UUID(int=0)
    return uuid.UUID(int=((t.high_bits % _I64) << 64) | (t.low_bits % _I64))


class ControllerService:
    """See the module docstring. ``dispatch(conn, call)`` answers through ``conn``."""

    def __init__(self, broker, *, clock_ms: Callable[[], int] | None = None,
                 auth: Authenticator | None = None) -> None:
        self.broker = broker
        self.auth = auth  # None: no credentials asked (the client's default, auth_enabled=False)
        self.state = state_of(broker)
        self.clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self.requests = metrics_for(broker).counter(
            "ferry_pravega_controller_requests_total", "Controller RPCs answered, by method and gRPC status.",
            ("method", "code"))
        self.handlers = {
            "createScope": self.create_scope,
            "checkScopeExists": self.check_scope_exists,
            "listScopes": self.list_scopes,
            "deleteScope": self.delete_scope,
            "createStream": self.create_stream,
            "checkStreamExists": self.check_stream_exists,
            "listStreamsInScope": self.list_streams,
            "listStreamsInScopeForTag": self.list_streams_for_tag,
            "getStreamConfiguration": self.stream_configuration,
            "updateStream": self.update_stream,
            "sealStream": self.seal_stream,
            "deleteStream": self.delete_stream,
            "truncateStream": self.truncate_stream,
            "getCurrentSegments": self.current_segments,
            "getEpochSegments": self.epoch_segments,
            "getSegments": self.segments_at,
            "getSegmentsImmediatelyFollowing": self.successors,
            "getSegmentsImmediatlyFollowing": self.successors,
            "getSegmentsBetween": self.segments_between,
            "getURI": self.uri,
            "isSegmentValid": self.segment_valid,
            "isStreamCutValid": self.stream_cut_valid,
            "getDelegationToken": self.delegation_token,
            "scale": self.scale,
            "checkScale": self.check_scale,
            "createTransaction": self.create_txn,
            "commitTransaction": self.commit_txn,
            "abortTransaction": self.abort_txn,
            "pingTransaction": self.ping_txn,
            "checkTransactionState": self.txn_state,
        }
        self.user = None  # the caller of the RPC being answered (auth on)

    # -- dispatch ---------------------------------------------------------------------------
    def dispatch(self, conn, call) -> None:
        counted = _Counted(conn, self.requests, call.method if call.method in P.RPCS else "other")
        self._dispatch(counted, call)

    def _dispatch(self, conn, call) -> None:
        method = call.method
        rpc = P.RPCS.get(method) if call.service == P.SERVICE else None
        handler = self.handlers.get(method) if rpc is not None else None
        if handler is None:
            conn.fail(call.stream_id, GrpcStatus.UNIMPLEMENTED, f"{call.service}/{method} is not served by Ferry")
            return
        try:
            request = rpc[0].decode(call.body)
        except ProtobufError as exc:
            conn.fail(call.stream_id, GrpcStatus.INVALID_ARGUMENT, f"malformed {rpc[0].__name__}: {exc}")
            return
        try:
            if self.auth is not None:
                self.user = self.auth.user(call.metadata)
                self._permit(method, request)
            reply = handler(request)
        except AuthError as exc:
            # Missing or wrong credentials get PERMISSION_DENIED, not UNAUTHENTICATED: the 0.3.8
            # client retries UNAUTHENTICATED with backoff for minutes, PERMISSION_DENIED is final
            # (pravega-client.md section 4), and a retry cannot fix a wrong password. Login
            # failures are audited by the user store; a refused permission here.
            if exc.code == "PERMISSION_DENIED":
                scope, stream = _addressed(request)
                denied(exc.action or method, scope=scope or None, stream=stream or None, rpc=method)
            conn.fail(call.stream_id, GrpcStatus.PERMISSION_DENIED, exc.message)
            return
        except _Status as s:
            conn.fail(call.stream_id, s.code, s.message)
            return
        except NotFound as exc:
            conn.fail(call.stream_id, GrpcStatus.NOT_FOUND, exc.message)
            return
        except InvalidArgument as exc:
            conn.fail(call.stream_id, GrpcStatus.INVALID_ARGUMENT, exc.message)
            return
        except FerryError as exc:  # storage or shutdown: retryable for the client
            conn.fail(call.stream_id, GrpcStatus.UNAVAILABLE, exc.message)
            return
        conn.reply(call.stream_id, reply.encode())

    # -- permissions (auth on) ---------------------------------------------------------------
    def _permit(self, method: str, request) -> None:
        """Check the caller may make this RPC, with Ferry's permission rules
        (core.permissions): scopes are streams, streams are topics."""
        need = _NEEDS.get(method)
        if need is None:  # getDelegationToken decides in its handler; the rest answer UNIMPLEMENTED
            return
        if method in _TXN_BY_ID and self._permit_txn(request):
            return
        scope, stream = _addressed(request)
        if need in _GLOBAL_ACTIONS:
            self.auth.require(self.user, need)
            return
        # The Ferry names, a [[binding]]'s included: its Pravega scope need not be a Ferry stream.
        names = self._names(P.StreamInfo(scope=scope, stream=stream)) if stream else None
        try:
            sid = self.broker.get_stream(names[0] if names else scope).id
        except (NotFound, InvalidArgument):
            return  # the handler answers "no such scope"; nothing to protect
        if need in _STREAM_ACTIONS or stream is None:
            self.auth.require(self.user, need if need in _STREAM_ACTIONS else Action.READ_STREAM, sid)
            return
        try:
            topic = self.broker.get_topic(*names) if names else None
        except NotFound:
            topic = None
        if topic is None and stream.endswith(TABLE_SUFFIX):  # a reader group's table (getURI)
            if not table_reader(self.broker, self.broker.meta.users, self.user, sid):
                raise AuthError("PERMISSION_DENIED", f"user {self.user.username!r} may not read_stream",
                                action=Action.READ_STREAM.value)
            return
        if topic is None:
            self.auth.require(self.user, Action.READ_STREAM, sid)
            return
        if need is Action.READ_TOPIC:  # what a reader or writer must learn to find the segments
            self.auth.require_any(self.user, _SEGMENT_READERS, sid, topic.id)
            return
        self.auth.require(self.user, need, sid, topic.id)

    def _permit_txn(self, request) -> bool:
        """A transaction named by id is checked against its own topic, whatever stream the
        request names; False when there is no such transaction (then the request's stream)."""
        self.state.expire(self.clock_ms())
        txn = self.state.get(uuid_of(request.txn_id))
        if txn is None:
            return False
        try:
            topic = self.broker.get_topic(txn.stream, txn.topic)
        except NotFound:
            return False
        self.auth.require(self.user, Action.SEND_MESSAGES, topic.stream_id, topic.id)
        return True

    def delegation_token(self, req: P.StreamInfo) -> P.DelegationToken:
        if self.auth is None:
            return P.DelegationToken(delegation_token="")  # auth is off: segment stores take ""
        users, user = self.broker.meta.users, self.user
        try:
            sid = self.broker.get_stream(req.scope).id
        except (NotFound, InvalidArgument):
            raise _Status(GrpcStatus.NOT_FOUND, f"no scope {req.scope!r}") from None
        names = self._names(req)
        try:
            topic = self.broker.get_topic(*names) if names else None
        except NotFound:
            topic = None
        if topic is not None:  # a stream: what the user may do with its messages
            ops = {op for op, action in ((READ, Action.POLL_MESSAGES), (WRITE, Action.SEND_MESSAGES))
                   if users.can(user, action, sid, topic.id)}
        else:  # a reader group's table (scope/<group>_kvtable): who may read the scope or poll in it
            ops = {READ, WRITE} if table_reader(self.broker, users, user, sid) else set()
        if not ops:
            raise AuthError("PERMISSION_DENIED", f"user {user.username!r} may not read or write "
                            f"{req.scope}/{req.stream}",
                            action=(Action.POLL_MESSAGES if topic is not None else Action.READ_STREAM).value)
        token = self.auth.issuer.issue(user.id, req.scope, req.stream, frozenset(ops), created_at=user.created_at)
        return P.DelegationToken(delegation_token=token)

    # -- names -------------------------------------------------------------------------------
    def _names(self, info) -> tuple[str, str] | None:
        """Ferry (stream, topic) of a Pravega StreamInfo, or None when Pravega cannot name one."""
        if info is None or not is_pravega_name(info.scope) or not is_pravega_name(info.stream):
            return None
        return self.broker.addressing.topic_for_pravega(info.scope, info.stream)

    def _topic(self, info):
        """The TopicInfo of a StreamInfo; NotFound (gRPC NOT_FOUND) when missing."""
        names = self._names(info)
        if names is None:
            raise _Status(GrpcStatus.NOT_FOUND, f"no stream {getattr(info, 'scope', '')}/{getattr(info, 'stream', '')}")
        return self.broker.get_topic(*names)

    def _scope_exists(self, scope: str) -> bool:
        try:
            self.broker.get_stream(scope)
            return True
        except StreamNotFound:
            return False

    # -- scopes ------------------------------------------------------------------------------
    def create_scope(self, req: P.ScopeInfo) -> P.CreateScopeStatus:
        S = P.CreateScopeStatus.Status
        if not is_pravega_name(req.scope):
            return P.CreateScopeStatus(status=S.INVALID_SCOPE_NAME)
        if self._scope_exists(req.scope):
            return P.CreateScopeStatus(status=S.SCOPE_EXISTS)
        self.broker.create_stream(req.scope)
        return P.CreateScopeStatus(status=S.SUCCESS)

    def check_scope_exists(self, req: P.ScopeInfo) -> P.ExistsResponse:
        return P.ExistsResponse(exists=is_pravega_name(req.scope) and self._scope_exists(req.scope))

    def list_scopes(self, req: P.ScopesRequest) -> P.ScopesResponse:
        after = req.continuation_token.token if req.continuation_token else ""
        names = sorted(s.name for s in self.broker.list_streams() if is_pravega_name(s.name) and s.name > after)
        page = names[:LIST_PAGE]
        token = page[-1] if page else after
        return P.ScopesResponse(scopes=tuple(page), continuation_token=P.ContinuationToken(token=token))

    def delete_scope(self, req: P.ScopeInfo) -> P.DeleteScopeStatus:
        S = P.DeleteScopeStatus.Status
        if not is_pravega_name(req.scope) or not self._scope_exists(req.scope):
            return P.DeleteScopeStatus(status=S.SCOPE_NOT_FOUND)
        if self.broker.list_topics(req.scope):
            return P.DeleteScopeStatus(status=S.SCOPE_NOT_EMPTY)
        for table in self.broker.tables.list(req.scope + "/"):
            self.broker.tables.delete(table, False)  # its reader groups' state
        self.broker.delete_stream(req.scope)
        return P.DeleteScopeStatus(status=S.SUCCESS)

    # -- streams -----------------------------------------------------------------------------
    def create_stream(self, req: P.StreamConfig) -> P.CreateStreamStatus:
        S = P.CreateStreamStatus.Status
        info = req.stream_info
        if info is None or not is_pravega_name(info.stream):
            return P.CreateStreamStatus(status=S.INVALID_STREAM_NAME)
        if not is_pravega_name(info.scope):
            return P.CreateStreamStatus(status=S.SCOPE_NOT_FOUND)
        names = self._names(info)
        if names is None:
            return P.CreateStreamStatus(status=S.INVALID_STREAM_NAME)
        if not self._scope_exists(names[0]):
            return P.CreateStreamStatus(status=S.SCOPE_NOT_FOUND)
        try:
            self.broker.get_topic(*names)
            return P.CreateStreamStatus(status=S.STREAM_EXISTS)
        except NotFound:
            pass
        segments = max(1, req.scaling_policy.min_num_segments if req.scaling_policy else 1)
        expiry, max_size = _retention(req.retention_policy)
        self.broker.create_topic(names[0], names[1], segments,
                                 settings=TopicSettings(message_expiry=expiry, max_topic_size=max_size))
        try:
            self.broker.topic_state.set_topic_attrs(names[0], names[1], _attrs(req))
        except FerryError:  # e.g. tags over the attribute limit: refuse the whole create, leave no stream
            self.broker.delete_topic(names[0], names[1])
            raise
        return P.CreateStreamStatus(status=S.SUCCESS)

    def check_stream_exists(self, req: P.StreamInfo) -> P.ExistsResponse:
        names = self._names(req)
        if names is None:
            return P.ExistsResponse(exists=False)
        try:
            self.broker.get_topic(*names)
            return P.ExistsResponse(exists=True)
        except NotFound:
            return P.ExistsResponse(exists=False)

    def _list(self, scope_info, token, keep) -> P.StreamsInScopeResponse:
        S = P.StreamsInScopeResponse.Status
        scope = scope_info.scope if scope_info else ""
        if not is_pravega_name(scope) or not self._scope_exists(scope):
            return P.StreamsInScopeResponse(status=S.SCOPE_NOT_FOUND)
        after = token.token if token else ""
        found = []
        for t in self.broker.list_topics(scope):
            pair = self.broker.addressing.pravega_names_for(scope, t.name)
            if pair is not None and pair[0] == scope and pair[1] > after and keep(t):
                found.append(pair[1])
        page = sorted(found)[:LIST_PAGE]
        return P.StreamsInScopeResponse(
            streams=tuple(P.StreamInfo(scope=scope, stream=s) for s in page),
            continuation_token=P.ContinuationToken(token=page[-1] if page else after), status=S.SUCCESS)

    def list_streams(self, req: P.StreamsInScopeRequest) -> P.StreamsInScopeResponse:
        return self._list(req.scope, req.continuation_token, lambda t: True)

    def list_streams_for_tag(self, req: P.StreamsInScopeWithTagRequest) -> P.StreamsInScopeResponse:
        def tagged(t) -> bool:
            return req.tag in json.loads(self.broker.topic_state.topic_attrs(t.stream_id, t.id).get(ATTR_TAGS, "[]"))
        return self._list(req.scope, req.continuation_token, tagged)

    def stream_configuration(self, req: P.StreamInfo) -> P.StreamConfig:
        topic = self._topic(req)
        attrs = self.broker.topic_state.topic_attrs(topic.stream_id, topic.id)
        scaling = json.loads(attrs.get(ATTR_SCALING, "{}"))
        if topic.message_expiry:
            retention = P.RetentionPolicy(retention_type=P.RetentionPolicy.RetentionPolicyType.TIME,
                                          retention_param=topic.message_expiry // _US_PER_MS)
        elif topic.max_topic_size:
            retention = P.RetentionPolicy(retention_type=P.RetentionPolicy.RetentionPolicyType.SIZE,
                                          retention_param=topic.max_topic_size)
        else:
            retention = None
        return P.StreamConfig(
            stream_info=P.StreamInfo(scope=req.scope, stream=req.stream),
            scaling_policy=P.ScalingPolicy(scale_type=scaling.get("type", 0), target_rate=scaling.get("rate", 0),
                                           scale_factor=scaling.get("factor", 0),
                                           min_num_segments=topic.partitions_count),
            retention_policy=retention,
            tags=P.Tags(tag=tuple(json.loads(attrs.get(ATTR_TAGS, "[]")))))

    def _update_target(self, info, status_cls):
        S = status_cls.Status
        names = self._names(info)
        if names is None or not self._scope_exists(names[0]):
            return None, status_cls(status=S.SCOPE_NOT_FOUND if hasattr(S, "SCOPE_NOT_FOUND") else S.STREAM_NOT_FOUND)
        try:
            return self.broker.get_topic(*names), None
        except NotFound:
            return None, status_cls(status=S.STREAM_NOT_FOUND)

    def update_stream(self, req: P.StreamConfig) -> P.UpdateStreamStatus:
        S = P.UpdateStreamStatus.Status
        topic, failed = self._update_target(req.stream_info, P.UpdateStreamStatus)
        if failed is not None:
            return failed
        if topic.sealed:
            return P.UpdateStreamStatus(status=S.STREAM_SEALED)
        wanted = max(1, req.scaling_policy.min_num_segments if req.scaling_policy else 1)
        if wanted != topic.partitions_count:
            # FAILURE would make the client retry with backoff for minutes; the request can never
            # succeed, so answer what the client treats as final (pravega-client.md section 4).
            raise _Status(GrpcStatus.INVALID_ARGUMENT, f"changing the segment count ({topic.partitions_count} -> "
                          f"{wanted}) is scaling, which Ferry streams do not do")
        expiry, max_size = _retention(req.retention_policy)
        self.broker.update_topic(topic.stream_id, topic.id,
                                 settings=replace(topic.settings, message_expiry=expiry, max_topic_size=max_size))
        self.broker.topic_state.set_topic_attrs(topic.stream_id, topic.id, _attrs(req))
        return P.UpdateStreamStatus(status=S.SUCCESS)

    def seal_stream(self, req: P.StreamInfo) -> P.UpdateStreamStatus:
        topic, failed = self._update_target(req, P.UpdateStreamStatus)
        if failed is not None:
            return failed
        self.broker.topic_state.seal_topic(topic.stream_id, topic.id)
        return P.UpdateStreamStatus(status=P.UpdateStreamStatus.Status.SUCCESS)

    def delete_stream(self, req: P.StreamInfo) -> P.DeleteStreamStatus:
        S = P.DeleteStreamStatus.Status
        topic, failed = self._update_target(req, P.DeleteStreamStatus)
        if failed is not None:
            return failed
        if not topic.sealed:
            return P.DeleteStreamStatus(status=S.STREAM_NOT_SEALED)
        self.broker.delete_topic(topic.stream_id, topic.id)
        return P.DeleteStreamStatus(status=S.SUCCESS)

    def truncate_stream(self, req: P.StreamCut) -> P.UpdateStreamStatus:
        S = P.UpdateStreamStatus.Status
        topic, failed = self._update_target(req.stream_info, P.UpdateStreamStatus)
        if failed is not None:
            return failed
        cut = dict(req.cut)
        for segment_id in cut:
            epoch, number = split_segment_id(segment_id)
            if epoch != 0 or number >= topic.partitions_count:
                raise _Status(GrpcStatus.INVALID_ARGUMENT, f"segment {segment_id} is not in this stream")
        try:
            for segment_id, offset in sorted(cut.items()):
                self.broker.topic_state.truncate_partition(topic.stream_id, topic.id, segment_id, offset)
        except InvalidOffset as exc:
            raise _Status(GrpcStatus.INVALID_ARGUMENT, exc.message) from None
        return P.UpdateStreamStatus(status=S.SUCCESS)

    # -- segments ----------------------------------------------------------------------------
    def _ranges(self, req: P.StreamInfo, topic) -> tuple:
        n = topic.partitions_count
        info = P.StreamInfo(scope=req.scope, stream=req.stream)
        return tuple(P.SegmentRange(segment_id=P.SegmentId(stream_info=info, segment_id=i),
                                    min_key=i / n, max_key=1.0 if i == n - 1 else (i + 1) / n) for i in range(n))

    def current_segments(self, req: P.StreamInfo) -> P.SegmentRanges:
        topic = self._topic(req)
        if topic.sealed:  # a sealed stream has no current segments (pravega-client.md section 3)
            return P.SegmentRanges()
        return P.SegmentRanges(segment_ranges=self._ranges(req, topic))

    def epoch_segments(self, req: P.GetEpochSegmentsRequest) -> P.SegmentRanges:
        topic = self._topic(req.stream_info)
        if req.epoch != 0:
            raise _Status(GrpcStatus.NOT_FOUND, f"epoch {req.epoch}: Ferry streams never scale (epoch 0 only)")
        return P.SegmentRanges(segment_ranges=self._ranges(req.stream_info, topic))

    def segments_at(self, req: P.GetSegmentsRequest) -> P.SegmentsAtTime:
        topic = self._topic(req.stream_info)
        info = P.StreamInfo(scope=req.stream_info.scope, stream=req.stream_info.stream)
        out = []
        for pid in range(topic.partitions_count):
            start = self.broker.topic_state.partition_byte_start(topic.stream_id, topic.id, pid)
            offset = start
            if req.timestamp > 0:  # the first event appended at or after that time (ms)
                part = self.broker.partition(topic.stream_id, topic.id, pid)
                at = part.offset_for_timestamp(req.timestamp * _US_PER_MS)
                offset = max(start, part.byte_pos_of(max(at, part.first_offset)))
            out.append(P.SegmentsAtTime.SegmentLocation(segment_id=P.SegmentId(stream_info=info, segment_id=pid),
                                                        offset=offset))
        return P.SegmentsAtTime(segments=tuple(out))

    def successors(self, req: P.SegmentId) -> P.SuccessorResponse:
        self._topic(req.stream_info)
        return P.SuccessorResponse()  # fixed segments: nothing ever follows a segment

    def segments_between(self, req: P.StreamCutRange) -> P.StreamCutRangeResponse:
        topic = self._topic(req.stream_info)
        info = P.StreamInfo(scope=req.stream_info.scope, stream=req.stream_info.stream)
        return P.StreamCutRangeResponse(
            segments=tuple(P.SegmentId(stream_info=info, segment_id=i) for i in range(topic.partitions_count)))

    def uri(self, req: P.SegmentId) -> P.NodeUri:
        where = self.state.segment_store
        if where is None:
            raise _Status(GrpcStatus.UNAVAILABLE, "the pravega segment store listener is not running")
        return P.NodeUri(endpoint=where[0], port=where[1])

    def segment_valid(self, req: P.SegmentId) -> P.SegmentValidityResponse:
        try:
            topic = self._topic(req.stream_info)
        except (_Status, NotFound):
            return P.SegmentValidityResponse(response=False)
        epoch, number = split_segment_id(req.segment_id)
        return P.SegmentValidityResponse(response=epoch == 0 and number < topic.partitions_count and not topic.sealed)

    def stream_cut_valid(self, req: P.StreamCut) -> P.StreamCutValidityResponse:
        try:
            topic = self._topic(req.stream_info)
        except (_Status, NotFound):
            return P.StreamCutValidityResponse(response=False)
        ok = True
        for segment_id, offset in dict(req.cut).items():
            epoch, number = split_segment_id(segment_id)
            if epoch != 0 or number >= topic.partitions_count:
                ok = False
                break
            part = self.broker.partition(topic.stream_id, topic.id, number)
            start = self.broker.topic_state.partition_byte_start(topic.stream_id, topic.id, number)
            ok = ok and (offset == -1 or start <= offset <= part.durable.byte_end)  # readers' end (reads.py)
        return P.StreamCutValidityResponse(response=ok)

    def scale(self, req: P.ScaleRequest) -> P.ScaleResponse:
        return P.ScaleResponse(status=P.ScaleResponse.ScaleStreamStatus.FAILURE)  # fixed segment counts

    def check_scale(self, req: P.ScaleStatusRequest) -> P.ScaleStatusResponse:
        return P.ScaleStatusResponse(status=P.ScaleStatusResponse.ScaleStatus.INVALID_INPUT)

    # -- transactions ------------------------------------------------------------------------
    def create_txn(self, req: P.CreateTxnRequest) -> P.CreateTxnResponse:
        topic = self._topic(req.stream_info)
        if topic.sealed:
            raise _Status(GrpcStatus.FAILED_PRECONDITION, "the stream is sealed")
        stream_name = self.broker.get_stream(topic.stream_id).name
        try:
            txn = self.state.open_txn(stream_name, topic.name, self.clock_ms(), req.lease)
        except TxnError as exc:
            raise _Status(GrpcStatus.RESOURCE_EXHAUSTED, str(exc)) from None
        return P.CreateTxnResponse(txn_id=txn_id_of(txn.id), active_segments=self._ranges(req.stream_info, topic))

    def _txn(self, req):
        self.state.expire(self.clock_ms())
        return self.state.get(uuid_of(req.txn_id))

    def commit_txn(self, req: P.TxnRequest) -> P.TxnStatus:
        S = P.TxnStatus.Status
        txn = self._txn(req)
        if txn is None:
            return P.TxnStatus(status=S.TRANSACTION_NOT_FOUND)
        if txn.state in (TxnState.COMMITTING, TxnState.COMMITTED):
            return P.TxnStatus(status=S.SUCCESS)
        if txn.state is not TxnState.OPEN:
            return P.TxnStatus(status=S.FAILURE)
        try:
            topic = self.broker.get_topic(txn.stream, txn.topic)
        except NotFound:
            self.state.finish(txn, TxnState.ABORTED)
            return P.TxnStatus(status=S.STREAM_NOT_FOUND)
        batches = [(pid, events) for pid, events in sorted(txn.events.items()) if events]
        pending = [len(batches)]

        def durable(outcome) -> None:
            if isinstance(outcome, BaseException):
                log.error("transaction commit failed to store", extra={"txn": str(txn.id)})
                return
            pending[0] -= 1
            if pending[0] == 0:
                self.state.finish(txn, TxnState.COMMITTED)

        txn.state = TxnState.COMMITTING
        try:
            for pid, events in batches:  # one append per segment: all of it or none is visible
                self.broker.append(topic.stream_id, topic.id, [AppendInput(e) for e in events], partition=pid,
                                   on_durable=durable, origin="pravega")
        except TopicSealed:
            self.state.finish(txn, TxnState.ABORTED)
            return P.TxnStatus(status=S.FAILURE)
        if not batches:
            self.state.finish(txn, TxnState.COMMITTED)
        return P.TxnStatus(status=S.SUCCESS)

    def abort_txn(self, req: P.TxnRequest) -> P.TxnStatus:
        S = P.TxnStatus.Status
        txn = self._txn(req)
        if txn is None:
            return P.TxnStatus(status=S.TRANSACTION_NOT_FOUND)
        if txn.state in (TxnState.COMMITTING, TxnState.COMMITTED):
            return P.TxnStatus(status=S.FAILURE)
        if txn.state is TxnState.OPEN:
            self.state.finish(txn, TxnState.ABORTED)
        return P.TxnStatus(status=S.SUCCESS)

    def ping_txn(self, req: P.PingTxnRequest) -> P.PingTxnStatus:
        S = P.PingTxnStatus.Status
        txn = self._txn(req)
        if txn is None:
            return P.PingTxnStatus(status=S.UNKNOWN)
        if txn.state in (TxnState.COMMITTING, TxnState.COMMITTED):
            return P.PingTxnStatus(status=S.COMMITTED)
        if txn.state is not TxnState.OPEN:
            return P.PingTxnStatus(status=S.ABORTED)
        txn.deadline_ms = self.clock_ms() + max(req.lease, 1)
        return P.PingTxnStatus(status=S.OK)

    def txn_state(self, req: P.TxnRequest) -> P.TxnState:
        txn = self._txn(req)
        state = TxnState.UNKNOWN if txn is None else txn.state
        return P.TxnState(state=P.TxnState.State(int(state)))


# What each RPC needs (auth on). Scope-level actions take the Ferry stream id,
# stream-level ones the topic id too; reads of a missing topic fall back to READ_STREAM.
_NEEDS: dict[str, Action] = {
    "createScope": Action.CREATE_STREAM, "listScopes": Action.READ_STREAMS, "checkScopeExists": Action.READ_STREAMS,
    "deleteScope": Action.MANAGE_STREAM, "createStream": Action.CREATE_TOPIC,
    "listStreamsInScope": Action.READ_TOPICS, "listStreamsInScopeForTag": Action.READ_TOPICS,
    **dict.fromkeys(("checkStreamExists", "getStreamConfiguration", "getCurrentSegments", "getEpochSegments",
                     "getSegments", "getSegmentsImmediatelyFollowing", "getSegmentsImmediatlyFollowing",
                     "getSegmentsBetween", "getURI", "isSegmentValid", "isStreamCutValid"), Action.READ_TOPIC),
    **dict.fromkeys(("updateStream", "sealStream", "deleteStream", "truncateStream", "scale", "checkScale"),
                    Action.MANAGE_TOPIC),
    **dict.fromkeys(("createTransaction", "commitTransaction", "abortTransaction", "pingTransaction",
                     "checkTransactionState"), Action.SEND_MESSAGES),
}
_GLOBAL_ACTIONS = frozenset({Action.CREATE_STREAM, Action.READ_STREAMS})
# A stream's metadata and segments (the READ_TOPIC RPCs): readers and writers of the topic
# need them to find its segments, so poll or send on it is enough.
_SEGMENT_READERS = (Action.READ_TOPIC, Action.POLL_MESSAGES, Action.SEND_MESSAGES)
# Transaction RPCs that name the transaction by id: checked against the transaction's topic.
_TXN_BY_ID = frozenset({"commitTransaction", "abortTransaction", "pingTransaction", "checkTransactionState"})
_STREAM_ACTIONS = frozenset({Action.MANAGE_STREAM, Action.CREATE_TOPIC, Action.READ_TOPICS})


def _addressed(request) -> tuple[str, str | None]:
    """(scope, stream or None) a request names, whatever its message type."""
    info = getattr(request, "stream_info", None)
    if info is not None:
        return info.scope, info.stream
    if isinstance(request, P.StreamInfo):
        return request.scope, request.stream
    if isinstance(request, P.ScopeInfo):
        return request.scope, None
    scope = getattr(request, "scope", None)
    if isinstance(scope, P.ScopeInfo):
        return scope.scope, None
    return "", None


class _Counted:
    """Wraps the gRPC connection to count each answer by method and status."""

    __slots__ = ("conn", "counter", "method")

    def __init__(self, conn, counter, method: str) -> None:
        self.conn, self.counter, self.method = conn, counter, method

    def reply(self, stream_id: int, body: bytes) -> None:
        self.counter.inc(self.method, "OK")
        self.conn.reply(stream_id, body)

    def fail(self, stream_id: int, code, message: str = "") -> None:
        self.counter.inc(self.method, GrpcStatus(code).name)
        self.conn.fail(stream_id, code, message)


def _retention(policy) -> tuple[int, int]:
    """(message_expiry µs, max_topic_size bytes) of a RetentionPolicy."""
    if policy is None:
        return 0, 0
    T = P.RetentionPolicy.RetentionPolicyType
    if policy.retention_type == T.TIME and policy.retention_param > 0:
        return policy.retention_param * _US_PER_MS, 0
    if policy.retention_type == T.SIZE and policy.retention_param > 0:
        return 0, policy.retention_param
    return 0, 0


def _attrs(req: P.StreamConfig) -> dict[str, str]:
    sp = req.scaling_policy
    scaling = {"type": int(sp.scale_type), "rate": sp.target_rate, "factor": sp.scale_factor} if sp else {}
    tags = list(req.tags.tag) if req.tags else []
    return {ATTR_TAGS: json.dumps(tags), ATTR_SCALING: json.dumps(scaling)}


__all__ = ["ControllerService", "txn_id_of", "uuid_of"]
