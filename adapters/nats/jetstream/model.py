"""A JetStream consumer's state (no trio).

:class:`Consumer` is the one record every consumer part reads and writes: the
registry (``consumers``), the cursor that picks and delivers messages
(``cursor``), push delivery (``push``), persistence (``consumer_store``) and
retention (``retention``). Its state is nats-server's: ``sseq``/``cseq`` (last
stream and consumer sequence delivered), the ack floor, and ``pending``
(stream seq -> :class:`Pending`) for messages delivered and not yet acked;
``rdc`` counts deliveries of redelivered messages until they are acked
(``num_redelivered``).

A durable consumer is one consumer across scale-out gateways: each gateway
keeps this record, and merges the others' saved state into it
(``consumer_store.merge``, docs/scale-out.md "JetStream consumers").
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from core.subjects import subject_matches

from .consumer_config import filters_of
from .push import PushState

if TYPE_CHECKING:  # pragma: no cover
    from .streams import JsStream


@dataclass(slots=True)
class Pending:
    cseq: int
    deliveries: int
    deadline: float
    ts: int                      # stored time, ns


@dataclass(eq=False)
class Consumer:
    stream: JsStream
    name: str
    config: dict[str, Any]
    created: str
    durable: bool
    sseq: int = 0
    cseq: int = 0
    floor_sseq: int = 0
    floor_cseq: int = 0
    pending: dict[int, Pending] = field(default_factory=dict)
    rdc: dict[int, int] = field(default_factory=dict)
    waiting: deque = field(default_factory=deque)
    delivered_ns: int = 0
    acked_ns: int = 0
    active: float = 0.0          # monotonic time of the last pull request or ack (push: since no subscriber)
    scan: int = 0                # last stream seq looked at for new messages
    np_count: int = 0            # matching messages in (scan, np_to]
    np_to: int = 0
    push: PushState | None = None
    ahead: deque = field(default_factory=deque)   # records read past the cursor, not yet looked at
    np_version: int = 0          # the stream index's hide events applied to np_count
    np_index: object = None      # ... of this index (a rebuilt one means counting again)
    lps: set | None = None       # last_per_subject: the seqs at or below lps_to it delivers
    lps_to: int = 0
    pause: tuple[str, int] = ("", 0)    # config pause_until text and its ns since the epoch
    replayed: tuple[float, int] | None = None   # replay original: (monotonic, stored ns) of the last new delivery
    replay_due: float = 0.0      # ... and when the next one may go
    version: int | None = None   # durable: the table version of the state last saved or merged here (None: never)

    @property
    def filters(self) -> list[str]:
        return filters_of(self.config)

    def takes(self, subject: str) -> bool:
        """Whether a message on ``subject`` passes the consumer's filters (none: every one)."""
        filters = self.filters
        return not filters or any(subject_matches(f, subject) for f in filters)

    @property
    def ack_none(self) -> bool:
        return self.config["ack_policy"] == "none"

    def ack_wait(self, deliveries: int) -> float:
        backoff = self.config.get("backoff")
        if backoff:
            return backoff[min(deliveries, len(backoff)) - 1] / 1e9
        return self.config.get("ack_wait", 0) / 1e9


__all__ = ["Consumer", "Pending"]
