"""Interest and work-queue retention: which messages consumers still need (no trio).

Theory of operation
-------------------
Under ``retention: interest`` a message stays while some consumer whose
filter matches it still needs it; under ``workqueue`` until the one
consumer that takes its subject acks it (kept while no consumer matches).
"Needs" is nats-server's ``needAck`` (server/consumer.go): above the ack
floor and either not delivered yet or delivered and unacked, or counted as
redelivered. :class:`RetentionRules` (owned by ``JsConsumers``, reading its
registry) answers that question for the streams module, which removes what nobody needs
through the subject index (``JetStreams.release``) after every ack, every
delivery of an ack-none consumer, a consumer's deletion and an index
rebuild (these two over every live message: queued on the index,
``to_release``, and checked ``warmup.RELEASE_SLICE`` at a time by the warm-up,
``warmup.release_step``; issue 30: in one piece they held the loop for the
whole stream); a message published on an interest stream whose subject no
consumer filters on is removed at once (``JetStreams.no_interest``).
New consumers of a work-queue stream follow nats-server's rules (explicit
ack, deliver all, one consumer per subject).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .config import subjects_overlap
from .consumer_config import filters_of
from .errors import JsApiError

if TYPE_CHECKING:  # pragma: no cover
    from .model import Consumer
    from .streams import JsStream

class RetentionRules:
    """Retention questions about the consumers in ``registry`` (the consumers'
    stream -> name -> consumer map, read only)."""

    def __init__(self, registry: dict[str, dict[str, Consumer]]) -> None:
        self.registry = registry

    def check_work_queue(self, st: "JsStream", name: str, cfg: dict) -> None:
        """nats-server's rules for a new consumer of a work-queue stream."""
        if cfg["ack_policy"] != "explicit":
            raise JsApiError("JSConsumerWQRequiresExplicitAckErr")
        if cfg["deliver_policy"] != "all":
            raise JsApiError("JSConsumerWQConsumerNotDeliverAllErr")
        others = [c for c in self.registry.get(st.name, {}).values() if c.name != name]
        if not others:
            return
        mine = filters_of(cfg)
        if not mine:
            raise JsApiError("JSConsumerWQMultipleUnfilteredErr")
        for other in others:
            if not other.filters or any(subjects_overlap(a, b) for a in mine for b in other.filters):
                raise JsApiError("JSConsumerWQConsumerNotUniqueErr")

    def interested(self, st: "JsStream", subject: str) -> bool:
        """Whether any consumer of ``st`` has a filter matching ``subject``."""
        return any(c.takes(subject) for c in self.registry.get(st.name, {}).values())

    def needed(self, st: "JsStream", seq: int, subject: str) -> bool:
        """Whether the message must stay: interest retention while some
        matching consumer still needs it, work queue until its consumer acks
        it (nats-server's needAck: above the ack floor and pending or not yet
        delivered, or counted as redelivered)."""
        cons = [c for c in self.registry.get(st.name, {}).values() if c.takes(subject)]
        if st.config["retention"] == "workqueue" and not cons:
            return True                          # nobody has taken it yet
        return any(_needs_ack(c, seq) for c in cons)


def _needs_ack(con: "Consumer", seq: int) -> bool:
    if seq > con.floor_sseq and (seq > con.sseq or seq in con.pending):
        return True
    return seq in con.rdc


__all__ = ["RetentionRules"]
