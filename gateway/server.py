"""The gateway process: broker, background tasks, listeners, bounded shutdown.

Theory of operation
-------------------
:func:`run_gateway` owns one broker for its lifetime (STYLE.md section 3,
after hypercorn's trio server):

1. take the data-directory lock (:mod:`gateway.lock`), open the broker, hand
   it the configuration and recent log lines snapshots report
   (:mod:`gateway.diagnostics`) and create the topics ``[[binding]]`` tables ask for;
2. start the broker's background tasks (flusher, retention) in a root nursery;
3. start every enabled listener with ``nursery.start`` in an *accept* nursery;
   each one reports its bound port and runs its connections in a shared
   *conns* nursery; print the banner and report ``{name: port}``;
4. on ``stop``: cancel the accept nursery (no new connections), set
   ``broker.draining`` (appends refuse with ShuttingDown, sessions close
   politely), give the conns nursery ``grace_seconds``, then cancel it;
5. stop the background tasks and ``broker.close()``: every partition is
   flushed and fsynced before the lock is released.

:func:`serve_until_signalled` wraps it for the CLI: SIGINT or SIGTERM sets the
stop event; a second signal skips the rest of the grace period.
"""

from __future__ import annotations

import logging
import signal
import sys
from contextlib import suppress
from typing import IO, Mapping

import trio

from adapters.iggy import dedup as iggy_dedup
from core.broker import Broker
from core.errors import InvalidArgument, StorageError, StreamAlreadyExists, StreamNotFound, TopicAlreadyExists, TopicNotFound
from core.flusher import run_broker_tasks

from . import diagnostics, version
from .banner import credential_warning, format_banner, open_doors
from .config import Config, ConfigError
from .lock import DataDirLock
from .registry import ListenerStartError, Registry, default_registry

log = logging.getLogger("ferry.gateway")

# Exit codes of `ferry serve` (the others: gateway.cli).
EXIT_OK = 0
EXIT_FORCED = 1  # a second signal cut the grace period short


def ensure_bound_topics(broker: Broker) -> list[tuple[str, str]]:
    """Create the streams and topics of ``create = true`` bindings that do
    not exist yet; returns the ``(stream, topic)`` pairs created."""
    created = []
    for b in broker.addressing.bindings_to_create():
        # Gateways sharing a store cluster (docs/scale-out.md) start together: another
        # one may create the same stream or topic first; that is as good as ours.
        try:
            broker.get_stream(b.stream)
        except StreamNotFound:
            with suppress(StreamAlreadyExists):
                broker.create_stream(b.stream)
        try:
            broker.get_topic(b.stream, b.topic)
        except TopicNotFound:
            try:
                broker.create_topic(b.stream, b.topic, b.partitions or 1)
            except TopicAlreadyExists:
                continue
            created.append((b.stream, b.topic))
            log.info("created bound topic", extra={"stream": b.stream, "topic": b.topic})
    return created


async def run_gateway(
    cfg: Config,
    stop: trio.Event,
    *,
    registry: Registry | None = None,
    out: IO[str] | None = None,
    task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run the gateway until ``stop`` is set, then shut down within the grace period.

    Supports ``nursery.start``: ``started()`` returns ``{listener name: bound
    port}`` once every enabled listener accepts. The banner goes to ``out``
    (stdout). Raises :class:`~gateway.lock.DataDirLocked` when another process
    holds the data directory and :class:`ListenerStartError` (inside an
    ExceptionGroup, from the nursery) when a listener cannot bind."""
    registry = registry or default_registry()
    with DataDirLock(cfg.server.data_dir):
        store = _store(cfg)
        try:
            broker = Broker.open(cfg.server.data_dir, cfg.broker_config(), store=store)
        except BaseException:
            if store is not None:
                store.close()
            raise
        broker.diagnostics = diagnostics.for_gateway(cfg).install()  # what snapshots report
        iggy_dedup.configure(broker, iggy_dedup.DedupSettings(  # [iggy]: Iggy's message deduplication
            cfg.iggy.message_deduplication, cfg.iggy.deduplication_max_entries,
            round(cfg.iggy.deduplication_expiry_seconds * 1_000_000)))
        try:
            async with trio.open_nursery() as cluster:
                if store is not None:  # the cluster connection, the pump and the mirrors
                    await cluster.start(store.run)
                await _with_retries(ensure_bound_topics, broker, store is not None)
                await _run_broker(broker, cfg, stop, registry, out or sys.stdout, task_status)
                if store is not None:
                    await _drain(store, cfg.server.grace_seconds)
                    store.close()
        finally:
            broker.diagnostics.remove()
            broker.close()  # flushes and fsyncs every partition
            if store is not None:
                store.close()
            log.info("broker closed", extra={"data_dir": str(cfg.server.data_dir)})


# A metadata write that met another gateway's (compare-and-set on the store's metadata
# log, docs/scale-out.md) fails and is tried again from the new state: a few times.
START_WRITE_TRIES = 5


async def _with_retries(step, broker, remote: bool):
    for attempt in range(START_WRITE_TRIES):
        try:
            return step(broker)
        except StorageError:
            if not remote or attempt == START_WRITE_TRIES - 1:
                raise
            await trio.sleep(0.05 * (attempt + 1))


def _store(cfg: Config):
    """The JetStream store when ``[store] url`` names a cluster (docs/scale-out.md), else
    None (the embedded log). Reaching the cluster is checked by ``Broker.open``."""
    if not cfg.store.urls:
        return None
    from .jetstream_store.store import JetStreamStore  # deferred: the embedded log never loads it

    return JetStreamStore(cfg.store)


async def _drain(store, grace_seconds: float) -> None:
    """Give appends already taken (queued for, or awaiting, the cluster) up to the
    grace period to be acknowledged before the store's connection closes."""
    with trio.move_on_after(max(grace_seconds, 0.1)):
        while store.unsettled():
            await trio.sleep(0.01)


async def _run_broker(broker, cfg, stop, registry, out, task_status) -> None:
    async with trio.open_nursery() as root:
        await root.start(run_broker_tasks, broker)
        async with trio.open_nursery() as conns:
            async with trio.open_nursery() as accept:
                ports = await _start_listeners(broker, cfg, registry, accept, conns)
                out.write(format_banner(cfg, ports, set(registry.specs), version()))
                out.flush()
                log.info("gateway started", extra={"ports": dict(ports)})
                for warning in filter(None, [credential_warning(cfg), *open_doors(cfg)]):
                    log.warning(warning)  # also in the logs: collectors rarely keep stdout banners
                task_status.started(ports)
                await stop.wait()
                log.info("shutting down", extra={"grace_seconds": cfg.server.grace_seconds})
                broker.draining = True
                broker.wake_readers()  # long polls and parked reads re-check and see draining
                accept.cancel_scope.cancel()
            conns.cancel_scope.deadline = trio.current_time() + cfg.server.grace_seconds
        if conns.cancel_scope.cancelled_caught:
            log.warning("grace period over; remaining connections were cut")
        root.cancel_scope.cancel()


async def _start_listeners(broker, cfg: Config, registry: Registry, accept, conns) -> Mapping[str, int]:
    ports: dict[str, int] = {}
    for lc in cfg.enabled_listeners():
        spec = registry.get(lc.name)
        if spec is None:
            log.debug("listener not available in this build", extra={"listener": lc.name})
            continue
        try:
            ports[lc.name] = await accept.start(spec.serve, broker, lc, conns)
        except OSError as exc:
            raise ListenerStartError(lc.name, f"{lc.host}:{lc.port}/{lc.transport}", exc) from exc
        except InvalidArgument as exc:
            # A listener refuses its options when it starts (an anonymous_user that is no
            # Ferry user, a bound out of range): a bad configuration, so one line and
            # exit code 2 like any other (gateway/cli/exits.py), not a failed command.
            raise ConfigError(exc.message, key=f"listeners.{lc.name}") from None
        log.info("listener started", extra={"listener": lc.name, "host": lc.host, "port": ports[lc.name]})
    return ports


async def serve_until_signalled(cfg: Config, *, registry: Registry | None = None, out: IO[str] | None = None) -> int:
    """Run the gateway until SIGINT or SIGTERM; returns the process exit code.

    The first signal starts the graceful shutdown (exit 0 once done); a
    second one cancels what is left of the grace period (exit 1)."""
    stop = trio.Event()
    forced = False

    async def watch(signals) -> None:
        nonlocal forced
        async for signum in signals:
            name = signal.Signals(signum).name
            if not stop.is_set():
                log.info("signal received; shutting down (send it again to stop at once)", extra={"signal": name})
                stop.set()
            else:
                log.warning("second signal; cutting the grace period short", extra={"signal": name})
                forced = True
                nursery.cancel_scope.cancel()

    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch, signals)
            await run_gateway(cfg, stop, registry=registry, out=out)
            nursery.cancel_scope.cancel()
    return EXIT_FORCED if forced else EXIT_OK


__all__ = [
    "EXIT_FORCED",
    "EXIT_OK",
    "ensure_bound_topics",
    "run_gateway",
    "serve_until_signalled",
]
