"""The durable state of Kafka transactions: one key-value table per transactional id.

Theory of operation
-------------------
Kafka keeps a transactional id's metadata in its ``__transaction_state`` log
(``TransactionLog``: producer id, epoch, state, timeout, partitions) and a
transaction's records in the partitions themselves, between control markers.
Ferry keeps both in the broker's key-value tables (core/kvtables.py: the
metadata store, synchronous=FULL; over the JetStream store the replicated
metadata log), one table per transactional id, named :data:`PREFIX` and the
first 32 hex digits of the id's SHA-256 (any id fits a table name; the id
itself is in the state document). The table holds:

* ``state``: the :class:`TxnDoc`, JSON: producer id and epoch (and the
  previous ones KIP-360 retries need), Kafka's ``TransactionState`` name, the
  timeout, the owner, the partitions and groups added, the transaction's
  generation, how many batches and bytes are staged, the last sequence per
  partition of this producer epoch (staged and aborted batches count: the
  client numbers on across an abort, as Kafka's log has them), and the
  offsets TxnOffsetCommit staged. Every change is a conditional update on
  the version read, so two gateways over one store never both move one
  transactional id (the loser gets TableKeyBadVersion and reads again).
* ``H`` gen index: a staged batch's header (:data:`_HEAD`: stream id, topic
  id, partition, record count, last sequence, bytes, chunks), written in the
  same update as the state that counts it: a batch exists once both do.
* ``D`` gen index chunk: its stored block (translate.to_block's layout) in
  chunks of :data:`CHUNK_BYTES`. A block needing more than one update
  (:data:`WRITE_BYTES`) writes its leading chunks first; a crash then leaves
  chunks no header names, harmless: keys carry the transaction's generation,
  which the next transaction moves on.
"""

from __future__ import annotations

import hashlib
import json
import logging
import struct
from dataclasses import asdict, dataclass, field

from core.errors import InvalidArgument, TableNotFound
from core.kvtables import MAX_PAGE_ENTRIES, NO_VERSION, NOT_EXISTS

log = logging.getLogger("ferry.kafka")
PREFIX = "_kafka/txn/"  # "_" keeps it apart from Pravega scopes, as offsets.PREFIX
STATE_KEY = b"state"
# A chunk of a staged block: under kvtables' 1 MiB value limit, and under
# nats-server's default max_payload (1 MB) once base64 puts it in a
# metadata-log entry (gateway/jetstream_store/layout.py), so one chunk always
# fits one write on either store.
CHUNK_BYTES = 512 * 1024
# Bytes of chunks per key-value update: one SQLite transaction (one fsync) per
# Produce in the common case, and over the JetStream store one metadata-log
# message of about 5.6 MB after base64, under the 16 MB max_payload
# docs/scale-out.md asks clusters for (kvtables allows 32 MiB per call).
WRITE_BYTES = 4 * 1024 * 1024
_HEAD = struct.Struct(">IIiiqQI")  # stream id, topic id, partition, count, last sequence, bytes, chunks
_KEY = struct.Struct(">II")  # generation, batch index
_CHUNK = struct.Struct(">III")  # generation, batch index, chunk

# Kafka's TransactionState names (TransactionMetadata.scala); PrepareEpochFence
# and Dead are not kept: a fence is one write here, ids are not expired.
EMPTY, ONGOING = "Empty", "Ongoing"
PREPARE_COMMIT, PREPARE_ABORT = "PrepareCommit", "PrepareAbort"
COMPLETE_COMMIT, COMPLETE_ABORT = "CompleteCommit", "CompleteAbort"
STATES = (EMPTY, ONGOING, PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT, COMPLETE_ABORT)


def table_name(txn_id: str) -> str:
    return PREFIX + hashlib.sha256(txn_id.encode()).hexdigest()[:32]


def part_key(stream_id: int, topic_id: int, partition: int) -> str:
    return f"{stream_id}:{topic_id}:{partition}"


@dataclass
class TxnDoc:
    """One transactional id's state (module docstring); ``version`` is the entry's
    version in its table (NOT_EXISTS before the first write), not stored."""

    txn_id: str
    owner: list  # [user id, created_at] of the Ferry user that initialised it
    pid: int = -1
    epoch: int = -1
    prev_pid: int = -1  # before the last rotation (KIP-360 retries after an exhausted epoch)
    last_epoch: int = -1  # TransactionMetadata.lastProducerEpoch
    state: str = EMPTY
    timeout_ms: int = 60_000
    start_ms: int = -1  # the caller's clock when the transaction started
    gen: int = 0  # transactions started under this id; staged keys carry it
    parts: list = field(default_factory=list)  # part_key()s added
    groups: list = field(default_factory=list)  # group ids added (AddOffsetsToTxn)
    batches: int = 0  # staged batches of this generation
    staged: int = 0  # their stored bytes
    seqs: dict = field(default_factory=dict)  # part_key -> last sequence of pid/epoch
    offsets: dict = field(default_factory=dict)  # group -> {"topic\0partition": [offset, epoch, metadata]}
    version: int = NOT_EXISTS

    def encode(self) -> bytes:
        doc = asdict(self)
        del doc["version"]
        return json.dumps(doc, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, value: bytes, version: int) -> "TxnDoc":
        doc = json.loads(value)
        if not isinstance(doc, dict) or doc.get("state") not in STATES:
            raise ValueError("not a transaction state document")
        known = {f for f in cls.__dataclass_fields__ if f != "version"}
        return cls(**{k: v for k, v in doc.items() if k in known}, version=version)  # newer keys: ignored


def load(tables, txn_id: str) -> TxnDoc | None:
    """The id's state, or None when it was never initialised."""
    try:
        (entry,) = tables.get(table_name(txn_id), [STATE_KEY])
    except TableNotFound:
        return None
    if entry is None:
        return None
    try:
        return TxnDoc.decode(entry[1], entry[2])
    except (ValueError, TypeError) as exc:  # a FerryError, so callers answer a Kafka error
        raise InvalidArgument(f"transactional id {txn_id[:80]!r}: unreadable state: {exc}") from None


def load_all(tables) -> list[TxnDoc]:
    """Every transactional id's state (the listener's start-up roll-forward)."""
    out = []
    for name in tables.list(PREFIX):
        try:
            (entry,) = tables.get(name, [STATE_KEY])
        except TableNotFound:
            continue
        if entry is not None:
            try:
                out.append(TxnDoc.decode(entry[1], entry[2]))
            except (ValueError, TypeError):
                log.warning("kafka transaction table %s: unreadable state, left alone", name)
                continue  # leave it to an operator, serve the others
    return out


def save(tables, doc: TxnDoc, extra: list = ()) -> None:
    """Write ``doc`` (conditional on the version it was read at) and ``extra`` entries
    in one update; ``doc.version`` becomes the new one. Raises TableKeyBadVersion."""
    name = table_name(doc.txn_id)
    rows = [*extra, (STATE_KEY, doc.encode(), doc.version)]
    if doc.version == NOT_EXISTS:
        tables.create(name)  # no-op when it exists
    doc.version = tables.update(name, rows)[-1]


def batch_rows(doc: TxnDoc, index: int, stream_id: int, topic_id: int, partition: int, count: int,
               last_seq: int, block) -> tuple[list, list]:
    """The entries staging one block as batch ``index``: (chunk rows, header rows)."""
    view = memoryview(block)
    chunks = [(b"D" + _CHUNK.pack(doc.gen, index, i), bytes(view[o:o + CHUNK_BYTES]), NO_VERSION)
              for i, o in enumerate(range(0, max(len(view), 1), CHUNK_BYTES))]
    head = _HEAD.pack(stream_id, topic_id, partition, count, last_seq, len(view), len(chunks))
    return chunks, [(b"H" + _KEY.pack(doc.gen, index), head, NO_VERSION)]


def write_chunks(tables, doc: TxnDoc, rows: list) -> list:
    """Write leading chunk rows ahead of the update that names them, keeping at most
    WRITE_BYTES for that update; returns the rows left for it."""
    name = table_name(doc.txn_id)
    size = sum(len(v) for _k, v, _n in rows)
    while size > WRITE_BYTES:
        take, nbytes = [], 0
        while rows and nbytes + len(rows[0][1]) <= WRITE_BYTES:
            nbytes += len(rows[0][1])
            take.append(rows.pop(0))
        if not take:
            take.append(rows.pop(0))
            nbytes = len(take[0][1])
        tables.update(name, take)  # the table exists: the state staging refers to is in it
        size -= nbytes
    return rows


def staged_batches(tables, doc: TxnDoc):
    """Yield the staged batches of ``doc``'s generation in staged order:
    (stream id, topic id, partition, count, last sequence, block bytearray)."""
    name = table_name(doc.txn_id)
    for first in range(0, doc.batches, MAX_PAGE_ENTRIES):
        keys = [b"H" + _KEY.pack(doc.gen, i) for i in range(first, min(doc.batches, first + MAX_PAGE_ENTRIES))]
        for entry in tables.get(name, keys):
            if entry is None:
                continue  # never written whole (see the module docstring)
            index = _KEY.unpack_from(entry[0], 1)[1]
            sid, tid, p, count, last_seq, nbytes, nchunks = _HEAD.unpack(entry[1])
            block = bytearray()
            per_get = max(1, WRITE_BYTES // CHUNK_BYTES)
            for c in range(0, nchunks, per_get):
                got = tables.get(name, [b"D" + _CHUNK.pack(doc.gen, index, i)
                                        for i in range(c, min(nchunks, c + per_get))])
                if any(g is None for g in got):
                    block = None
                    break
                for g in got:
                    block += g[1]
            if block is None or len(block) != nbytes:
                continue  # a partial batch was never acknowledged
            yield sid, tid, p, count, last_seq, block


def purge(tables, txn_id: str, gen: int, batches: int) -> None:
    """Remove the ``batches`` batches generation ``gen`` staged (left-overs of a
    crash stay behind harmlessly: the next generation never reads them)."""
    name = table_name(txn_id)
    try:
        for first in range(0, batches, MAX_PAGE_ENTRIES // 2):
            heads = tables.get(name, [b"H" + _KEY.pack(gen, i)
                                      for i in range(first, min(batches, first + MAX_PAGE_ENTRIES // 2))])
            doomed = []
            for entry in heads:
                if entry is not None:
                    index = _KEY.unpack_from(entry[0], 1)[1]
                    doomed.append(entry[0])
                    doomed += [b"D" + _CHUNK.pack(gen, index, c) for c in range(_HEAD.unpack(entry[1])[6])]
            for i in range(0, len(doomed), MAX_PAGE_ENTRIES):
                tables.remove(name, [(k, NO_VERSION) for k in doomed[i:i + MAX_PAGE_ENTRIES]])
    except TableNotFound:
        return


__all__ = ["CHUNK_BYTES", "COMPLETE_ABORT", "COMPLETE_COMMIT", "EMPTY", "ONGOING", "PREFIX", "PREPARE_ABORT",
           "PREPARE_COMMIT", "STATES", "TxnDoc", "WRITE_BYTES", "batch_rows", "load", "load_all", "part_key",
           "purge", "save", "staged_batches", "table_name", "write_chunks"]
