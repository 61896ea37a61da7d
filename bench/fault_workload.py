"""The clients of the fault schedule (bench/fault_schedule.py, issue 30): writers and
consumers that span the gateways and record every outcome in the history (bench/history_check.py
names the events).

* ``KafkaWriter``: a confluent-kafka idempotent producer (``enable.idempotence``, ``acks=all``)
  bootstrapped at one gateway; message ``<producer>:<seq>`` to partition ``seq % partitions``.
  librdkafka re-sends on its own; a delivery report is an ``ack`` (with the offset) or a
  ``fail``. A fatal idempotence error (librdkafka raises the producer's state to fatal, e.g. an
  out-of-order sequence) ends that producer instance; a new instance (new producer id, name
  ``<writer>.<n>``) carries on, so the checker judges each instance on its own.
* ``KafkaMember``: a member of one consumer group bootstrapped at one gateway, committing
  synchronously about once a second; ``read`` per record, ``commit`` per partition the broker
  accepted.
* ``js_writer``: nats-py ``js.publish`` with ``Nats-Msg-Id`` through the gateways (its own first,
  the others next, as nats-py reconnects); an attempt that fails is retried with the same id
  until acknowledged, so a retry after a lost PubAck is exactly the case JetStream's duplicate
  window exists for.
* ``js_fetcher``: a durable pull consumer shared by fetchers on different gateways, each
  message acked after its ``read`` is recorded.

All clients log in as Ferry's root user (docs/security.md): Kafka with SASL PLAIN, NATS with
user and password.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from functools import partial

from confluent_kafka import Consumer, KafkaException, Producer

MSG_TIMEOUT_MS = 120_000   # librdkafka's delivery limit per message (default 300 s): a run ends in time
MAX_IN_QUEUE = 2_000       # records queued in one producer before it waits (bounded memory)
COMMIT_EVERY_S = 1.0
PUB_TIMEOUT_S = 5.0        # one js.publish attempt; the retry reuses the id
RETRY_PAUSE_S = 0.2
GIVE_UP_S = 100.0          # a JetStream message retried this long is recorded as ``fail`` (< the 120 s window)
PING_S = 2                 # nats-py pings (default 120 s) so a frozen gateway is noticed within seconds
GROUP_TIMERS = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500}  # Kafka's smallest session timeout


class History:
    """The history file: one JSON object per line, appended under a lock by every thread."""

    def __init__(self, path) -> None:
        self.path = path
        self._f = open(path, "a", encoding="utf-8", buffering=1)
        self._lock = threading.Lock()

    def emit(self, ev: str, **fields) -> None:
        line = json.dumps({"t": round(time.time(), 6), "ev": ev, **fields})
        with self._lock:
            self._f.write(line + "\n")

    def close(self) -> None:
        with self._lock:
            self._f.close()


def parse(value: bytes) -> tuple[str, int]:
    producer, _, seq = value.decode().rpartition(":")
    return producer, int(seq)


def kafka_conf(port: int, user: str, password: str) -> dict:
    # log_level 3: librdkafka's errors only; its warnings repeat once per broker per
    # reconnect while gateways come and go.
    return {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT", "log_level": 3,
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": password}


class KafkaWriter(threading.Thread):
    def __init__(self, name: str, conf: dict, topic: str, partitions: int, hist: History,
                 stop: threading.Event, pause_s: float) -> None:
        super().__init__(name=name, daemon=True)
        self.conf, self.topic, self.partitions, self.hist = conf, topic, partitions, hist
        self.stop, self.pause_s = stop, pause_s
        self.acked = self.failed = 0

    def _done(self, producer: str, seq: int, first: float, err, msg) -> None:
        if err is not None:
            self.failed += 1
            self.hist.emit("fail", path="kafka", producer=producer, seq=seq, error=str(err))
        else:
            self.acked += 1
            self.hist.emit("ack", path="kafka", producer=producer, seq=seq, partition=msg.partition(),
                           offset=msg.offset(), first_try=first)

    def run(self) -> None:
        instance = 0
        while not self.stop.is_set():
            name = f"{self.name}.{instance}"
            fatal = threading.Event()

            def on_error(err, name=name, fatal=fatal) -> None:
                if err.fatal():
                    self.hist.emit("note", what="kafka producer fatal", producer=name, error=str(err))
                    fatal.set()

            # FS_RDKAFKA_DEBUG=eos (or eos,protocol) logs librdkafka's producer-id and epoch
            # decisions to stderr: why each epoch bump happened (docs/scale-out.md, item 6).
            debug = {"debug": os.environ["FS_RDKAFKA_DEBUG"], "log_level": 7} if os.environ.get(
                "FS_RDKAFKA_DEBUG") else {}
            p = Producer({**self.conf, "enable.idempotence": True, "acks": "all", "linger.ms": 5,
                          "message.timeout.ms": MSG_TIMEOUT_MS, "error_cb": on_error, **debug})
            seq = 0
            while not self.stop.is_set() and not fatal.is_set():
                if len(p) >= MAX_IN_QUEUE:
                    p.poll(0.1)
                    continue
                try:
                    p.produce(self.topic, value=f"{name}:{seq}".encode(), partition=seq % self.partitions,
                              on_delivery=partial(self._done, name, seq, time.time()))
                except (BufferError, KafkaException) as err:
                    self.hist.emit("note", what="kafka produce refused", producer=name, error=str(err))
                    p.poll(0.5)
                    continue
                seq += 1
                p.poll(self.pause_s)
            left = p.flush(MSG_TIMEOUT_MS / 1000 + 10)
            if left:
                self.hist.emit("note", what="kafka producer left messages unreported", producer=name, left=left)
            instance += 1


class KafkaMember(threading.Thread):
    def __init__(self, name: str, conf: dict, topic: str, group: str, hist: History,
                 stop: threading.Event) -> None:
        super().__init__(name=name, daemon=True)
        self.conf, self.topic, self.group, self.hist, self.stop = conf, topic, group, hist, stop
        self.seen: set[tuple[int, int]] = set()

    def run(self) -> None:
        c = Consumer({**self.conf, **GROUP_TIMERS, "group.id": self.group, "enable.auto.commit": False,
                      "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 1000})
        c.subscribe([self.topic])
        last_commit, dirty = time.monotonic(), False
        try:
            while not self.stop.is_set():
                m = c.poll(0.5)
                if m is not None and m.error() is None:
                    producer, seq = parse(m.value())
                    self.seen.add((m.partition(), m.offset()))
                    self.hist.emit("read", path="kafka", consumer=self.name, partition=m.partition(),
                                   offset=m.offset(), producer=producer, seq=seq)
                    dirty = True
                if dirty and time.monotonic() - last_commit >= COMMIT_EVERY_S:
                    last_commit, dirty = time.monotonic(), False
                    self._commit(c)
            self._commit(c)
        finally:
            c.close()

    def _commit(self, c: Consumer) -> None:
        try:
            done = c.commit(asynchronous=False)
        except KafkaException as err:  # no offsets, a rebalance, a coordinator away: retried next time
            self.hist.emit("note", what="kafka commit failed", consumer=self.name, error=str(err))
            return
        for tp in done or ():
            if tp.error is None and tp.offset >= 0:
                self.hist.emit("commit", path="kafka", group=self.group, consumer=self.name,
                               partition=tp.partition, offset=tp.offset)


# -- JetStream (nats-py, asyncio: each runs in its own thread's loop) ---------------------------------
async def _quiet(*_args) -> None:
    """nats-py's default callbacks print a traceback per lost connection: faults are the
    point here, and the history records what they did to the clients."""


async def nats_connect(servers: list[str], user: str, password: str, **opts):
    import nats

    opts = {"error_cb": _quiet, "disconnected_cb": _quiet, "reconnected_cb": _quiet, **opts}
    return await nats.connect(servers=servers, user=user, password=password, dont_randomize=True,
                              max_reconnect_attempts=-1, reconnect_time_wait=0.5, connect_timeout=2,
                              ping_interval=PING_S, max_outstanding_pings=2, **opts)


async def _sleep_unless(stop: threading.Event, s: float) -> None:
    if not stop.is_set():
        await asyncio.sleep(s)


async def js_writer(name: str, servers: list[str], creds: tuple[str, str], subject: str, hist: History,
                    stop: threading.Event, pause_s: float) -> None:
    nc = await nats_connect(servers, *creds)
    js = nc.jetstream(timeout=PUB_TIMEOUT_S)
    seq = 0
    try:
        while not stop.is_set():
            msg_id, first = f"{name}:{seq}", time.time()
            while True:
                try:
                    ack = await js.publish(subject, msg_id.encode(), headers={"Nats-Msg-Id": msg_id},
                                           timeout=PUB_TIMEOUT_S)
                except Exception as err:  # noqa: BLE001 - any failure: not acknowledged, retry the same id
                    if time.time() - first > GIVE_UP_S:
                        hist.emit("fail", path="js", producer=name, seq=seq, error=repr(err))
                        break
                    await asyncio.sleep(RETRY_PAUSE_S)
                    continue
                hist.emit("ack", path="js", producer=name, seq=seq, partition=0, offset=ack.seq,
                          first_try=first, dup=bool(ack.duplicate))
                break
            seq += 1
            await _sleep_unless(stop, pause_s)
    finally:
        await _close(nc)


async def js_fetcher(name: str, servers: list[str], creds: tuple[str, str], stream: str, durable: str,
                     hist: History, stop: threading.Event) -> None:
    nc = await nats_connect(servers, *creds)
    js = nc.jetstream(timeout=PUB_TIMEOUT_S)
    psub = None
    try:
        while not stop.is_set():
            try:
                if psub is None:
                    psub = await js.pull_subscribe_bind(durable, stream)
                msgs = await psub.fetch(50, timeout=2)
            except asyncio.TimeoutError:
                continue
            except Exception as err:  # noqa: BLE001 - a gateway away: fetch again (maybe through another)
                hist.emit("note", what="js fetch failed", consumer=name, error=repr(err))
                await asyncio.sleep(0.5)
                continue
            for m in msgs:
                producer, seq = parse(m.data)
                hist.emit("read", path="js", consumer=name, partition=0, offset=m.metadata.sequence.stream,
                          producer=producer, seq=seq)
                try:
                    await m.ack()
                except Exception as err:  # noqa: BLE001 - redelivered after ack_wait: at least once
                    hist.emit("note", what="js ack failed", consumer=name, error=repr(err))
    finally:
        await _close(nc)


async def _close(nc) -> None:
    try:
        await asyncio.wait_for(nc.close(), 5)
    except (Exception, asyncio.CancelledError):  # noqa: BLE001 - its server may be gone
        pass


def in_thread(name: str, coro_fn, *args) -> threading.Thread:
    """Run ``coro_fn(*args)`` in its own asyncio loop on a daemon thread (nats-py is asyncio;
    the schedule itself is plain threads); an exception is printed, the thread ends."""
    def run() -> None:
        try:
            asyncio.run(coro_fn(*args))
        except Exception as err:  # noqa: BLE001 - reported by the run's summary as a client death
            print(f"fault_schedule: client {name} died: {err!r}", flush=True)

    t = threading.Thread(target=run, name=name, daemon=True)
    t.start()
    return t
