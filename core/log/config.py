"""Log configuration and the limits that bound it.

Every limit is a named constant with its reason. ``LogConfig`` validates itself
on construction so a bad value in the gateway's TOML file fails at start, with
the field's name, instead of at the first flush.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InvalidArgument

MiB = 1024 * 1024

# Iggy's server default segment is 1 GiB; 256 MiB keeps a sealed segment's
# offset index (28 bytes per record) mappable and retention steps fine-grained
# while still rolling rarely. Tests pass tiny sizes to exercise rolls.
DEFAULT_SEGMENT_BYTES = 256 * MiB
# Positions inside a segment are u64 in the index, but a batch length is a u32:
# keeping segments under 4 GiB keeps every in-segment quantity comfortably in range.
MAX_SEGMENT_BYTES = 4 * 1024 * MiB - 1

FSYNC_ALWAYS = "always"  # fsync as soon as anything is pending
FSYNC_BATCH = "batch"  # group commit, plus an optional commit delay after a busy round (fsync_interval_ms)
FSYNC_NEVER = "never"  # ack after the write(2); the OS decides when it reaches disk
FSYNC_POLICIES = (FSYNC_ALWAYS, FSYNC_BATCH, FSYNC_NEVER)

# 5 ms: the window NATS JetStream and Kafka-style group commit use as a
# latency/throughput trade-off; an NVMe fdatasync costs about this much, so
# waiting one interval roughly doubles the batch an fsync carries.
# The batch policy's commit delay after a busy round (core/flusher.py). 0: none, pure group
# commit (appends that meet a running fsync share the next one). A 5 ms default held a
# lockstep client to one batch per 5 ms, and even a busy-round-only window cost 8 concurrent
# JetStream publishers ~30 % (bench/jetstream_bench.py pub8, docs/storage.md).
DEFAULT_FSYNC_INTERVAL_MS = 0.0
# Acks wait for the fsync, so a long interval only delays every ack by that
# much; anything past one minute is certainly a unit mistake (seconds vs ms).
MAX_FSYNC_INTERVAL_MS = 60_000.0

# Soft bound on bytes appended but not yet written per partition. Past it,
# append() still succeeds (data is never dropped) but Partition.over_limit turns
# True so drivers stop reading from their sockets (STYLE.md section 3,
# backpressure). 8 MiB: the largest max_payload NATS recommends, so one maximal
# message always fits, and about one second of writes at the 40k appends/s of
# ~200 B the log is sized for: past that the disk is simply not keeping up.
DEFAULT_MAX_PENDING_BYTES = 8 * MiB

# One flush writes at most this many bytes; a larger backlog is written over
# several rounds. Bounds the memory of one join and the time of one write(2),
# and keeps a batch length inside its u32 field. 256 MiB = MAX_PAYLOAD * 4.
MAX_BATCH_BYTES = 256 * MiB
# One append call must fit in one batch, with room left for the header and a
# dedup snapshot: half a batch. Adapters refuse far smaller requests first
# (Iggy's and NATS' own limits), so only a runaway caller meets this one.
MAX_APPEND_BYTES = MAX_BATCH_BYTES // 2

# Producers remembered per partition for dedup. Kafka forgets an idle producer
# after transactional.id.expiration.ms; here the least recently written one is
# forgotten once the table is full, which also bounds the snapshot written at
# each segment roll (at most ~2.6 MiB with 255-byte ids).
DEFAULT_MAX_PRODUCERS = 10_000

# A producer idle this long is forgotten too, whatever the table's size: Pravega
# writer ids are random per writer instance (a UUID each), so without an idle
# expiry every writer ever started would hold an entry until max_producers
# pushed it out (protocols/pravega.md 12: "Expire idle writers after a
# configurable TTL (default 7 days)"; Kafka's producer.id.expiration.ms is one
# day). 0 keeps producers until max_producers evicts them.
DEFAULT_PRODUCER_TTL_MS = 7 * 24 * 3600 * 1000
# Past ten years a TTL is surely a unit mistake (seconds vs ms, or µs).
MAX_PRODUCER_TTL_MS = 10 * 365 * 24 * 3600 * 1000


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Storage settings shared by every partition of a broker.

    ``segment_bytes``: roll to a new segment once the active one would grow
    past this. ``fsync``: one of :data:`FSYNC_POLICIES`. ``fsync_interval_ms``:
    the ``batch`` policy's cap on the wait after a busy round (core/flusher.py). ``max_pending_bytes``: the
    backpressure threshold (``Partition.over_limit``). ``max_producers``: dedup
    table size per partition. ``producer_ttl_ms``: a producer not written for
    this long is forgotten (0 = never; ``core/log/producers.py``).
    """

    segment_bytes: int = DEFAULT_SEGMENT_BYTES
    fsync: str = FSYNC_BATCH
    fsync_interval_ms: float = DEFAULT_FSYNC_INTERVAL_MS
    max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES
    max_producers: int = DEFAULT_MAX_PRODUCERS
    producer_ttl_ms: int = DEFAULT_PRODUCER_TTL_MS

    def __post_init__(self) -> None:
        if not isinstance(self.segment_bytes, int) or not 1 <= self.segment_bytes <= MAX_SEGMENT_BYTES:
            raise InvalidArgument(
                f"log.segment_bytes must be an integer in 1..{MAX_SEGMENT_BYTES}, got {self.segment_bytes!r}"
            )
        if self.fsync not in FSYNC_POLICIES:
            raise InvalidArgument(f"log.fsync must be one of {', '.join(FSYNC_POLICIES)}, got {self.fsync!r}")
        interval = self.fsync_interval_ms
        is_number = isinstance(interval, (int, float)) and not isinstance(interval, bool)
        if not is_number or not 0 <= interval <= MAX_FSYNC_INTERVAL_MS:
            raise InvalidArgument(
                f"log.fsync_interval_ms must be a number in 0..{MAX_FSYNC_INTERVAL_MS:g}, got {interval!r}"
            )
        if not isinstance(self.max_pending_bytes, int) or self.max_pending_bytes < 1:
            raise InvalidArgument(f"log.max_pending_bytes must be a positive integer, got {self.max_pending_bytes!r}")
        if not isinstance(self.max_producers, int) or self.max_producers < 1:
            raise InvalidArgument(f"log.max_producers must be a positive integer, got {self.max_producers!r}")
        ttl = self.producer_ttl_ms
        if isinstance(ttl, bool) or not isinstance(ttl, int) or not 0 <= ttl <= MAX_PRODUCER_TTL_MS:
            raise InvalidArgument(f"log.producer_ttl_ms must be an integer in 0..{MAX_PRODUCER_TTL_MS}, got {ttl!r}")

    @property
    def fsyncs(self) -> bool:
        """True unless the policy is ``never``."""
        return self.fsync != FSYNC_NEVER
