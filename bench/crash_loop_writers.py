"""The writers of bench/crash_loop.py: one real client per protocol, one process each.

``python crash_loop_writers.py PROTOCOL CONFIG_JSON``, started by crash_loop.py with the
interpreter that has the protocol's client (apache-iggy and pravega live in their own
venvs, tests/support/iggy_clients.py and pravega_clients.py). Only the standard library
is imported at module level, so every one of those interpreters can load this file.

Every writer behaves as an application that must not lose what it sent:

* it journals each acknowledged message (its sequence number, unique per writer and
  written into the payload and the message id) to its journal file the moment the
  acknowledgement arrives, one ``first last`` range per line, flushed at once;
* on a broken connection it reconnects and sends the unacknowledged messages again with
  the same ids (Iggy binary and HTTP: the same batch, same message ids; JetStream: the
  same ``Nats-Msg-Id``); librdkafka's idempotent producer and the pravega writer retry on
  their own, so those two writers only keep producing and wait for their acks;
* once the stop file exists it sends nothing new, finishes (acknowledges) what is
  outstanding while the server is up, prints ``{"event": "done", ...}`` and exits.

Every writer logs in as Ferry's root user: Iggy TCP and NATS with a personal access token
crash_loop.py made (``token``), HTTP, Kafka (SASL/PLAIN) and Pravega (Basic) with the password.

Payloads are ASCII (the pravega client writes str events): ``<seq>:`` then filler up to
``size`` bytes. The message ids: Iggy ``seq + 1`` (0 asks the server to pick one, Iggy's
``MessageId`` rule), JetStream ``js-<seq>``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import random
import sys
import time

# Ferry names of each protocol's topic (docs/addressing.md); crash_loop.py reads them back.
STREAM = "crash"
IGGY_TOPIC, HTTP_TOPIC, KAFKA_TOPIC = "iggy", "http", "kafka"
JS_STREAM, JS_SUBJECT = "CRASH", "crash.js"      # Ferry topic jetstream/CRASH (docs/nats.md)
PV_SCOPE, PV_STREAM, PV_KEY = "crashpv", "s", "k"  # one segment, one routing key: one order
CONNECT_LIMIT_S = 5    # one connect + login attempt; the server may be down, then we try again
SEND_LIMIT_S = 20      # one send's answer: a dead socket that nobody closes must not hang a writer
RETRY_PAUSE_S = 0.2    # between attempts while the server restarts (it is back within seconds)
DRAIN_LIMIT_S = 120    # after stop: how long outstanding sends may take to be acknowledged
MAX_ERRORS_KEPT = 8    # distinct error texts reported in the done line


class Writer:
    """Journal, stop file, counters and the payloads of one writer process."""

    def __init__(self, cfg: dict) -> None:
        self.cfg = cfg
        self.journal = open(cfg["journal"], "a", encoding="ascii")  # noqa: SIM115 - process lifetime
        self.parent = os.getppid()
        filler = random.Random(cfg["seed"]).choices("ABCDEFGHIJKLMNOPQRSTUVWXYZ", k=cfg["size"])
        self.filler = "".join(filler)
        self.stats = {"acked": 0, "sent": 0, "resent": 0, "reconnects": 0, "failed": 0, "duplicate_acks": 0}
        self.errors: dict[str, int] = {}
        self.stop_at: float | None = None
        self.broken = False

    def payload(self, seq: int) -> str:
        head = f"{seq}:"
        return head + self.filler[: max(self.cfg["size"] - len(head), 0)]

    def ack(self, first: int, last: int | None = None) -> None:
        last = first if last is None else last
        self.journal.write(f"{first} {last}\n")
        self.journal.flush()  # the orchestrator, not this process, is what gets killed
        self.stats["acked"] += last - first + 1

    def broke(self) -> None:
        """A send failed (the server was killed): the next ack counts as one recovery."""
        self.broken = True

    def recovered(self) -> None:
        if self.broken:
            self.stats["reconnects"] += 1
            self.broken = False

    def error(self, exc: BaseException | str) -> None:
        text = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"[:200]
        if text in self.errors or len(self.errors) < MAX_ERRORS_KEPT:
            self.errors[text] = self.errors.get(text, 0) + 1

    def stopping(self) -> bool:
        if os.getppid() != self.parent:  # the orchestrator is gone: nobody will read our verdict
            os._exit(3)
        if self.stop_at is None and os.path.exists(self.cfg["stop"]):
            self.stop_at = time.monotonic()
        return self.stop_at is not None

    def drained_too_long(self) -> bool:
        return self.stopping() and time.monotonic() - self.stop_at > DRAIN_LIMIT_S

    def next_batch(self, batch: list[int] | None, seq: int) -> tuple[list[int] | None, int, bool]:
        """``(batch to send, next seq, a fresh batch)`` for the batch writers (Iggy, HTTP): a
        new one of ``batch`` sequences unless one is outstanding; None when stopping with
        nothing outstanding, or when an outstanding one was retried past DRAIN_LIMIT_S."""
        if batch is None:
            if self.stopping():
                return None, seq, False
            self.stats["sent"] += self.cfg["batch"]
            return list(range(seq, seq + self.cfg["batch"])), seq + self.cfg["batch"], True
        if self.drained_too_long():
            self.stats["failed"] += len(batch)
            return None, seq, False
        return batch, seq, False

    def done(self, **extra) -> None:
        line = {"event": "done", **self.stats, "errors": self.errors, **extra}
        sys.stdout.write(json.dumps(line) + "\n")
        sys.stdout.flush()


# -- Iggy binary (apache-iggy 0.9, TCP) -------------------------------------------------------------
async def iggy_tcp(w: Writer) -> None:
    from apache_iggy import AutoLogin, IggyClient, SendMessage, TcpConfig, TcpReconnectionConfig

    cfg, client, seq, batch, tried = w.cfg, None, 0, None, False
    while True:
        batch, seq, fresh = w.next_batch(batch, seq)
        if batch is None:
            break
        tried = tried and not fresh
        try:
            if client is None:
                # The SDK's own reconnection off: this loop reconnects and resends, so what is
                # resent (and when) is the application's choice, visible in the counters.
                # Logged in with a personal access token (a hash lookup) as part of the connect:
                # the password would cost the server an argon2 verification every cycle.
                client = IggyClient(TcpConfig(server_address=f"127.0.0.1:{cfg['port']}",
                                              reconnection=TcpReconnectionConfig(enabled=False),
                                              auto_login=AutoLogin.personal_access_token(cfg["token"])))
                await asyncio.wait_for(client.connect(), CONNECT_LIMIT_S)
            # Explicit ids, the same on every attempt of this batch: what a server-side
            # dedup would recognise (Iggy's message deduplication keys on the message id).
            msgs = [SendMessage(w.payload(s), id=s + 1) for s in batch]
            w.stats["resent"] += len(batch) if tried else 0
            tried = True
            await asyncio.wait_for(client.send_messages(STREAM, IGGY_TOPIC, 0, msgs), SEND_LIMIT_S)
        except Exception as exc:  # noqa: BLE001 - the server was killed: reconnect, resend the batch
            w.error(exc)
            w.broke()
            client = None
            await asyncio.sleep(RETRY_PAUSE_S)
            continue
        w.recovered()
        w.ack(batch[0], batch[-1])
        batch = None


# -- Iggy HTTP API (httpx) ---------------------------------------------------------------------------
def http_api(w: Writer) -> None:
    import httpx

    cfg = w.cfg
    url = f"http://127.0.0.1:{cfg['port']}"
    path = f"/streams/{STREAM}/topics/{HTTP_TOPIC}/messages"
    # partition 0 as Iggy's HTTP API takes it: the u32 little-endian, base64 (docs/http.md)
    partitioning = {"kind": "partition_id", "value": base64.b64encode((0).to_bytes(4, "little")).decode()}
    client = httpx.Client(base_url=url, timeout=SEND_LIMIT_S)
    token, seq, batch, tried = None, 0, None, False
    while True:
        batch, seq, fresh = w.next_batch(batch, seq)
        if batch is None:
            break
        tried = tried and not fresh
        body = {"partitioning": partitioning, "messages": [
            {"id": s + 1, "payload": base64.b64encode(w.payload(s).encode()).decode()} for s in batch]}
        try:
            if token is None:
                r = client.post("/users/login", json={"username": cfg["user"], "password": cfg["password"]})
                r.raise_for_status()
                token = r.json()["access_token"]["token"]
            again, went_out = tried, True
            try:
                r = client.post(path, json=body, headers={"authorization": f"Bearer {token}"})
            except httpx.ConnectError:
                went_out = False  # refused: nothing went out, so the next attempt is no resend
                raise
            finally:
                if went_out:
                    w.stats["resent"] += len(batch) if again else 0
                    tried = True
            if r.status_code == 401:  # a token the restarted server no longer takes: log in again
                token = None
                raise RuntimeError("401")
            if r.status_code != 201:
                raise RuntimeError(f"HTTP {r.status_code}: {r.text[:120]}")
        except Exception as exc:  # noqa: BLE001 - killed mid-request: same batch, same ids again
            w.error(exc)
            w.broke()
            time.sleep(RETRY_PAUSE_S)
            continue
        w.recovered()
        w.ack(batch[0], batch[-1])
        batch = None
    client.close()


# -- JetStream (nats-py js.publish with Nats-Msg-Id) ----------------------------------------------------
async def jetstream(w: Writer) -> None:
    import nats

    cfg, nc, js, seq, window, created, tried = w.cfg, None, None, 0, [], False, False
    lost = asyncio.Event()

    async def quiet(*_args) -> None:
        lost.set()  # the connection broke: every publish still waiting will not be answered

    async def one(s: int) -> bool:
        ack = await js.publish(JS_SUBJECT, w.payload(s).encode(), timeout=SEND_LIMIT_S,
                               headers={"Nats-Msg-Id": f"js-{s}"})
        w.ack(s)
        if ack.duplicate:
            w.stats["duplicate_acks"] += 1
        return True

    while True:
        window, seq, fresh = w.next_batch(window or None, seq)  # acked publishes leave the window
        if window is None:
            break
        tried = tried and not fresh
        try:
            if nc is None:
                lost.clear()
                nc = await nats.connect(f"nats://127.0.0.1:{cfg['port']}", token=cfg["token"],  # as for Iggy
                                        allow_reconnect=False, max_reconnect_attempts=0,
                                        connect_timeout=CONNECT_LIMIT_S, error_cb=quiet, disconnected_cb=quiet,
                                        closed_cb=quiet)
                js = nc.jetstream()
                if not created:  # the same config again is fine (docs/nats.md, STREAM.CREATE)
                    await js.add_stream(name=JS_STREAM, subjects=[JS_SUBJECT])
                    created = True
            # The window goes out in sequence order on one connection, so the server stores
            # it in that order; a retry resends the unacknowledged rest in the same order.
            w.stats["resent"] += len(window) if tried else 0
            tried = True
            tasks = [asyncio.ensure_future(one(s)) for s in window]
            watch = asyncio.ensure_future(lost.wait())
            await asyncio.wait([asyncio.gather(*tasks, return_exceptions=True), watch],
                               return_when=asyncio.FIRST_COMPLETED)
            watch.cancel()
            for t in tasks:
                t.cancel()  # no-op on the answered ones
            results = await asyncio.gather(*tasks, return_exceptions=True)
            for r in results:
                if isinstance(r, Exception):
                    w.error(r)
            window = [s for s, r in zip(window, results) if r is not True]
            if window:
                raise ConnectionError("publishes unanswered")
            w.recovered()
        except Exception as exc:  # noqa: BLE001 - reconnect and publish the rest again, same ids
            w.error(exc)
            w.broke()
            if nc is not None:
                try:
                    await asyncio.wait_for(nc.close(), 1)
                except Exception:  # noqa: BLE001 - the server is dead; close only tidies up
                    pass
            nc = None
            await asyncio.sleep(RETRY_PAUSE_S)
    if nc is not None:
        await nc.close()


# -- Pravega (pravega 0.3.8 EventStreamWriter) ----------------------------------------------------------
async def pravega(w: Writer) -> None:
    import pravega_client

    cfg = w.cfg
    while True:  # the scope and stream, once; the server may be down when we start
        try:
            m = pravega_client.StreamManager(f"tcp://127.0.0.1:{cfg['port']}", auth_enabled=True)
            m.create_scope(PV_SCOPE)
            m.create_stream(PV_SCOPE, PV_STREAM, 1)
            writer = m.create_writer(PV_SCOPE, PV_STREAM)
            break
        except Exception as exc:  # noqa: BLE001
            w.error(exc)
            await asyncio.sleep(RETRY_PAUSE_S)
    seq = 0
    # The writer keeps its events across reconnects and resends only what the server does
    # not hold (SetupAppend answers the last event number stored for the writer id), so
    # each future here resolves once, when its event is durable.
    while not w.stopping():
        futs = [(s, writer.write_event_async(w.payload(s), PV_KEY)) for s in range(seq, seq + cfg["batch"])]
        seq += cfg["batch"]
        w.stats["sent"] += len(futs)
        for s, fut in futs:
            try:
                await asyncio.wait_for(fut, DRAIN_LIMIT_S)
            except Exception as exc:  # noqa: BLE001 - not acknowledged; the writer gave up
                w.error(exc)
                w.stats["failed"] += 1
                continue
            w.ack(s)
    writer.flush()


# -- Kafka (confluent-kafka, idempotent) ------------------------------------------------------------------
def kafka(w: Writer) -> None:
    from confluent_kafka import Producer

    cfg = w.cfg
    p = Producer({
        "bootstrap.servers": f"127.0.0.1:{cfg['port']}", "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN", "sasl.username": cfg["user"], "sasl.password": cfg["password"],
        "enable.idempotence": True, "acks": "all", "linger.ms": 5,
        # the server is back within seconds: librdkafka's 10 s backoff cap would idle the writer
        "reconnect.backoff.ms": 100, "reconnect.backoff.max.ms": 1000,
        "log_level": 3,  # errors only: every kill logs a disconnect per broker thread
    })

    def report(err, msg) -> None:
        if err is None:
            w.ack(int(msg.value().split(b":", 1)[0]))
        else:
            w.error(str(err)[:200])
            w.stats["failed"] += 1

    seq, window = 0, cfg["batch"]
    while not w.stopping():
        if w.stats["sent"] - w.stats["acked"] - w.stats["failed"] >= window:
            p.poll(0.05)
            continue
        try:
            p.produce(f"{STREAM}.{KAFKA_TOPIC}", value=w.payload(seq).encode(), partition=0, on_delivery=report)
        except BufferError:
            p.poll(0.05)
            continue
        seq += 1
        w.stats["sent"] += 1
        p.poll(0)
    left = p.flush(DRAIN_LIMIT_S)
    w.stats["failed"] += left


WRITERS = {"iggy": iggy_tcp, "http": http_api, "jetstream": jetstream, "pravega": pravega, "kafka": kafka}


def main() -> None:
    proto, cfg = sys.argv[1], json.loads(sys.argv[2])
    w = Writer(cfg)
    sys.stdout.write(json.dumps({"event": "started", "protocol": proto}) + "\n")
    sys.stdout.flush()
    fn = WRITERS[proto]
    if asyncio.iscoroutinefunction(fn):
        asyncio.run(fn(w))
    else:
        fn(w)
    w.done()
    # The Rust clients' runtimes can abort at interpreter teardown, after the verdict.
    os._exit(0)


if __name__ == "__main__":
    main()
