"""Shared helpers for the Broker tests (test_broker_*.py)."""

from __future__ import annotations

from pathlib import Path

from core.broker import Broker, BrokerConfig
from core.log import AppendInput, LogConfig
from log_helpers import Acks  # noqa: F401 - re-exported for the broker tests


def open_broker(path: Path, **log_cfg) -> Broker:
    """A broker over ``path``; ``log_cfg`` goes to LogConfig (fsync "always" unless given)."""
    log_cfg.setdefault("fsync", "always")
    return Broker.open(path, BrokerConfig(log=LogConfig(**log_cfg)))


def items(*payloads: bytes | str, headers: bytes = b"") -> list[AppendInput]:
    return [AppendInput(p.encode() if isinstance(p, str) else p, headers) for p in payloads]


def payloads(batch) -> list[bytes]:
    return [bytes(rv.payload) for rv in batch.records()]


def offsets(batch) -> list[int]:
    return [rv.offset for rv in batch.records()]


class Inbox:
    """A live subscriber (core.live.Subscriber) that keeps what it is offered;
    ``room`` bounds it like an adapter's outbox (deliver returns False when full)."""

    def __init__(self, name: str = "", room: int = 1 << 30) -> None:
        self.name = name
        self.room = room
        self.got: list = []

    def deliver(self, delivery) -> bool:
        if len(self.got) >= self.room:
            return False
        self.got.append(delivery)
        return True

    @property
    def payloads(self) -> list[bytes]:
        return [bytes(d.payload) for d in self.got]

    def __repr__(self) -> str:
        return f"<Inbox {self.name}>"
