"""A replicated metadata log in memory, for tests of what several gateways' MetaDbs share
in scale-out mode (core.metadb.Replicator): compare-and-set on its last sequence, as the
cluster's ``<PREFIX>_META`` stream does with ``Nats-Expected-Last-Sequence``
(gateway/jetstream_store/store.py)."""

from __future__ import annotations

from core.errors import StorageError


class MemoryMetaLog:
    """``entries[i]`` is sequence ``i + 1``. ``down`` makes every catch-up fail as the
    cluster does without a leader; ``caught_up`` counts catch-ups."""

    def __init__(self) -> None:
        self.entries: list[list] = []
        self.caught_up = 0
        self.down = False

    def before_write(self, db) -> None:
        if self.down:
            raise StorageError("JetStream did not answer (no leader, or not enabled)")
        self.caught_up += 1
        for seq in range(db.replica_seq + 1, len(self.entries) + 1):
            db.apply_entry(seq, self.entries[seq - 1])

    def publish(self, statements, after_seq: int) -> int:
        if after_seq != len(self.entries):
            raise StorageError("conflict")
        self.entries.append(list(statements))
        return len(self.entries)

    def publish_anywhere(self, statements, db) -> int:
        self.before_write(db)
        return self.publish(statements, db.replica_seq)


__all__ = ["MemoryMetaLog"]
