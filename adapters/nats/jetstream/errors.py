"""JetStream API errors: the one table of what Ferry answers, as nats-server answers it (no trio).

Theory of operation
-------------------
nats-server replies to a failed ``$JS.API`` request (and to a refused
JetStream publish) with ``{"error": {"code", "err_code", "description"}}``.
:data:`ERRORS` lists every such error Ferry sends, keyed by nats-server's own
constant name so a grep of nats-server's ``server/errors.json`` finds it:
HTTP-like ``code``, JetStream ``err_code`` and the description, with
``{placeholders}`` filled from the raise site. Values were checked against
nats-server 2.15.1 (tests/nats/test_nats_jetstream_streams.py compares the
two servers' replies).

Features Ferry does not have (interest or work-queue retention, mirrors,
rollups, ...) have no error of their own in nats-server; Ferry refuses them
with ``JSStreamInvalidConfigF`` (500/10052, the error nats-server uses for
every config it cannot accept) and a description that names the feature.
"""

from __future__ import annotations

from typing import NamedTuple


class ErrorSpec(NamedTuple):
    code: int
    err_code: int
    description: str


ERRORS: dict[str, ErrorSpec] = {
    "JSBadRequestErr": ErrorSpec(400, 10003, "bad request"),
    "JSInvalidJSONErr": ErrorSpec(400, 10025, "invalid JSON: {err}"),
    "JSNoMessageFoundErr": ErrorSpec(404, 10037, "no message found"),
    "JSStreamInvalidConfigF": ErrorSpec(500, 10052, "{err}"),
    "JSStreamMessageExceedsMaximumErr": ErrorSpec(400, 10054, "message size exceeds maximum allowed"),
    "JSStreamMismatchErr": ErrorSpec(400, 10056, "stream name in subject does not match request"),
    "JSStreamNameExistErr": ErrorSpec(400, 10058, "stream name already in use with a different configuration"),
    "JSStreamNotFoundErr": ErrorSpec(404, 10059, "stream not found"),
    "JSStreamNotMatchErr": ErrorSpec(400, 10060, "expected stream does not match"),
    "JSStreamSubjectOverlapErr": ErrorSpec(400, 10065, "subjects overlap with an existing stream"),
    "JSStreamWrongLastMsgIDErrF": ErrorSpec(400, 10070, "wrong last msg ID: {id}"),
    "JSStreamWrongLastSequenceErrF": ErrorSpec(400, 10071, "wrong last sequence: {seq}"),
    "JSStreamReplicasNotSupportedErr": ErrorSpec(500, 10074, "replicas > 1 not supported in non-clustered mode"),
    "JSStreamStoreFailedF": ErrorSpec(503, 10077, "{err}"),
    "JSStreamSealedErr": ErrorSpec(400, 10109, "invalid operation on sealed stream"),
    "JSStreamPurgeFailedF": ErrorSpec(500, 10110, "{err}"),
    "JSStreamRollupFailedF": ErrorSpec(500, 10111, "{err}"),
    "JSStreamMsgDeleteFailedF": ErrorSpec(500, 10057, "{err}"),
    "JSMessageTTLInvalidErr": ErrorSpec(400, 10165, "invalid per-message TTL"),
    "JSMessageTTLDisabledErr": ErrorSpec(400, 10166, "per-message TTL is disabled"),
    # consumers (adapters/nats/jetstream/consumers.py)
    "JSConsumerCreateErrF": ErrorSpec(500, 10012, "{err}"),
    "JSConsumerNameExistErr": ErrorSpec(400, 10013, "consumer name already in use"),
    "JSConsumerNotFoundErr": ErrorSpec(404, 10014, "consumer not found"),
    "JSConsumerDurableNameNotMatchSubjectErr": ErrorSpec(
        400, 10017, "consumer name in subject does not match durable name in request"),
    "JSConsumerDurableNameNotSetErr": ErrorSpec(400, 10018, "consumer expected to be durable but a durable name was not set"),
    "JSConsumerEphemeralWithDurableNameErr": ErrorSpec(
        400, 10020, "consumer expected to be ephemeral but a durable name was set in request"),
    "JSConsumerDeliverToWildcardsErr": ErrorSpec(400, 10079, "consumer deliver subject has wildcards"),
    "JSConsumerPushMaxWaitingErr": ErrorSpec(400, 10080, "consumer in push mode can not set max waiting"),
    "JSConsumerDeliverCycleErr": ErrorSpec(400, 10081, "consumer deliver subject forms a cycle"),
    "JSConsumerMaxPendingAckPolicyRequiredErr": ErrorSpec(400, 10082, "consumer requires ack policy for max ack pending"),
    "JSConsumerSmallHeartbeatErr": ErrorSpec(400, 10083, "consumer idle heartbeat needs to be >= 100ms"),
    "JSConsumerHBRequiresPushErr": ErrorSpec(400, 10088, "consumer idle heartbeat requires a push based consumer"),
    "JSConsumerFCRequiresPushErr": ErrorSpec(400, 10089, "consumer flow control requires a push based consumer"),
    "JSConsumerInvalidPolicyErrF": ErrorSpec(400, 10094, "{err}"),
    "JSConsumerPullRequiresAckErr": ErrorSpec(400, 10084, "consumer in pull mode requires explicit ack policy on workqueue stream"),
    "JSConsumerWQRequiresExplicitAckErr": ErrorSpec(400, 10098, "workqueue stream requires explicit ack"),
    "JSConsumerWQMultipleUnfilteredErr": ErrorSpec(400, 10099, "multiple non-filtered consumers not allowed on workqueue stream"),
    "JSConsumerWQConsumerNotUniqueErr": ErrorSpec(400, 10100, "filtered consumer not unique on workqueue stream"),
    "JSConsumerWQConsumerNotDeliverAllErr": ErrorSpec(400, 10101, "consumer must be deliver all on workqueue stream"),
    "JSConsumerWithFlowControlNeedsHeartbeats": ErrorSpec(400, 10108, "consumer with flow control also needs heartbeats"),
    "JSConsumerInvalidDeliverSubject": ErrorSpec(400, 10112, "invalid push consumer deliver subject"),
    "JSConsumerMaxDeliverBackoffErr": ErrorSpec(400, 10116, "max deliver is required to be > length of backoff values"),
    "JSConsumerCreateFilterSubjectMismatchErr": ErrorSpec(
        400, 10131, "Consumer create request did not match filtered subject from create subject"),
    "JSConsumerDuplicateFilterSubjects": ErrorSpec(
        400, 10136, "consumer cannot have both FilterSubject and FilterSubjects specified"),
    "JSConsumerOverlappingSubjectFilters": ErrorSpec(400, 10138, "consumer subject filters cannot overlap"),
    "JSConsumerAlreadyExists": ErrorSpec(400, 10148, "consumer already exists"),
    "JSConsumerDoesNotExist": ErrorSpec(400, 10149, "consumer does not exist"),
    "JSConsumerAckWaitNegativeErr": ErrorSpec(400, 10183, "consumer ack wait needs to be positive"),
}


class JsApiError(Exception):
    """One refusal from :data:`ERRORS`; ``fields`` fill its placeholders."""

    def __init__(self, name: str, **fields: object) -> None:
        spec = ERRORS[name]
        self.name = name
        self.code = spec.code
        self.err_code = spec.err_code
        self.description = spec.description.format(**fields) if fields else spec.description
        super().__init__(self.description)

    def to_json(self) -> dict:
        return {"code": self.code, "err_code": self.err_code, "description": self.description}


def invalid_config(text: str) -> JsApiError:
    """nats-server's catch-all for a stream config it refuses (and Ferry's for what it lacks)."""
    return JsApiError("JSStreamInvalidConfigF", err=text)


def not_supported(feature: str) -> JsApiError:
    """A feature nats-server has and Ferry does not (yet): docs/nats.md "JetStream"."""
    return invalid_config(f"{feature} is not supported by Ferry")


__all__ = ["ERRORS", "ErrorSpec", "JsApiError", "invalid_config", "not_supported"]
