"""Core queries added for the Iggy adapter (kept small; core owns the semantics)."""

from __future__ import annotations

from core.broker import Broker


def test_group_assignment(tmp_path):
    with Broker.open(tmp_path / "d") as b:
        b.create_stream("s")
        b.create_topic("s", "t", 3)
        b.consumers.create_group("s", "t", "g")
        assert b.consumers.group_assignment("s", "t", "g", 7) is None
        b.consumers.join_group("s", "t", "g", 7)
        gen1, parts = b.consumers.group_assignment("s", "t", "g", 7)
        assert parts == (0, 1, 2)
        b.consumers.join_group("s", "t", "g", 8)
        gen2, parts = b.consumers.group_assignment("s", "t", "g", 7)
        assert gen2 > gen1 and parts == (0, 2)
        assert b.consumers.group_assignment("s", "t", "g", 8)[1] == (1,)
