"""The trio driver for Iggy over QUIC (UDP): aioquic's sans-I/O QuicConnection on a trio socket.

Theory of operation
-------------------
One UDP socket serves every QUIC connection (aioquic's server example,
hypercorn's trio QUIC server). Datagrams are routed by destination
connection id; an unknown id on an Initial packet starts a connection.
Each connection runs two tasks in the listener's connection nursery:

* the I/O task: waits for a datagram or the connection's timer
  (``get_timer()``; time is ``trio.current_time()``), hands aioquic's events
  to the glue (adapters/iggy/quic.py), sends ``datagrams_to_send``;
* the request task: takes finished request streams one at a time (Iggy is one
  request per stream, one session per connection), lets the session answer,
  completing Deferred answers as the TCP driver does, and writes the reply.

Metrics: the TCP driver's :class:`~adapters.iggy.driver.IggyMeter` under
``listener="iggy_quic"`` (a connection counts from the client's first Initial
packet; a malformed request stream is an error).

The certificate is self-signed for ``localhost`` and made at start (the Iggy
SDK's QUIC client uses server name ``localhost`` and does not verify
certificates by default; no ALPN: protocols/iggy.md 1.2, iggy-current.md 10).
"""

from __future__ import annotations

import datetime
import itertools
import logging
import math

import trio
from aioquic.buffer import Buffer
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection
from aioquic.quic.events import ConnectionIdIssued, ConnectionIdRetired
from aioquic.quic.packet import QuicPacketType, encode_quic_version_negotiation, pull_quic_header

from .driver import IggyMeter, _complete
from .events import Deferred, Evict
from .quic import IggyQuicGlue
from .session import TRANSPORT_QUIC, IggySession

log = logging.getLogger("ferry.iggy.quic")

MAX_DATAGRAM = 65536
IDLE_TIMEOUT_S = 10.0  # the SDK's default max_idle_timeout (iggy-current.md 10)
LISTENER = "iggy_quic"  # the metrics label: the listener's name in gateway/registry.py
_CLIENT_IDS = itertools.count(1 << 31)  # apart from the TCP driver's ids: both share group membership


def self_signed_localhost():
    """A fresh EC P-256 key and a self-signed certificate for ``localhost``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=3650))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
            .sign(key, hashes.SHA256()))
    return cert, key


def server_configuration() -> QuicConfiguration:
    cfg = QuicConfiguration(is_client=False, idle_timeout=IDLE_TIMEOUT_S)
    cfg.certificate, cfg.private_key = self_signed_localhost()
    return cfg


class _Conn:
    def __init__(self, server: "_Server", quic: QuicConnection, addr) -> None:
        self.server = server
        self.quic = quic
        self.addr = addr
        self.session = IggySession(server.broker, client_id=next(_CLIENT_IDS) & 0xFFFFFFFF,
                                   address=f"{addr[0]}:{addr[1]}", transport=TRANSPORT_QUIC)
        self.glue = IggyQuicGlue(quic, self.session)
        self.wake = trio.Event()
        server.meter.opened(self.session, close=self.kick)
        self.requests_ready = trio.Event()
        self.cids: set[bytes] = set()

    def kick(self) -> None:
        """Close from the console: CONNECTION_CLOSE (no error) goes out on the next
        pump; the connection then ends when aioquic says it terminated."""
        self.quic.close(error_code=0, reason_phrase="closed by an operator")
        self.wake.set()

    def datagram(self, data: bytes, addr) -> None:
        self.quic.receive_datagram(data, addr, now=trio.current_time())
        self.wake.set()

    async def io_loop(self) -> None:
        try:
            while not self.glue.terminated:
                timer = self.quic.get_timer()
                with trio.move_on_at(timer if timer is not None else math.inf):
                    await self.wake.wait()
                self.wake = trio.Event()
                now = trio.current_time()
                if timer is not None and now >= timer:
                    self.quic.handle_timer(now)
                await self.pump()
        finally:
            self.server.forget(self)

    async def pump(self) -> None:
        """Drain aioquic's events, then send what it has queued."""
        events = []
        while (ev := self.quic.next_event()) is not None:
            if isinstance(ev, ConnectionIdIssued):
                self.server.route(ev.connection_id, self)
            elif isinstance(ev, ConnectionIdRetired):
                self.server.unroute(ev.connection_id)
            events.append(ev)
        before = len(self.glue.ready)
        self.glue.feed_events(events)
        if len(self.glue.ready) != before:
            self.requests_ready.set()
        for data, addr in self.quic.datagrams_to_send(now=trio.current_time()):
            await self.server.sock.sendto(data, addr)

    async def request_loop(self) -> None:
        while not self.glue.terminated:
            if not self.glue.ready:
                self.requests_ready = trio.Event()
                await self.requests_ready.wait()
                continue
            stream_id, data = self.glue.ready.popleft()
            event, err = self.glue.request_events(data)
            if err is not None:
                self.server.meter.error(self.session, f"malformed request stream: {err} (stream reset)")
                self.glue.fail(stream_id, err)
            else:
                answer = self.session.handle(event)
                if isinstance(answer, Deferred):
                    answer = await _complete(self.session, answer, getattr(event, "command", None))
                self.glue.reply(stream_id, answer)
            self.wake.set()
            if err is not None or isinstance(answer, Evict):
                return

    async def run(self) -> None:
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self.request_loop)
                await self.io_loop()
                nursery.cancel_scope.cancel()
        except* Exception:
            log.exception("iggy QUIC connection failed", extra={"peer": self.session.address})
        finally:
            self.session.close()
            self.server.meter.closed(self.session)


class _Server:
    def __init__(self, broker, sock, config: QuicConfiguration, nursery) -> None:
        self.broker = broker
        self.sock = sock
        self.config = config
        self.nursery = nursery
        self.conns: dict[bytes, _Conn] = {}
        self.meter = IggyMeter(broker, LISTENER)

    def route(self, cid: bytes, conn: _Conn) -> None:
        self.conns[cid] = conn
        conn.cids.add(cid)

    def unroute(self, cid: bytes) -> None:
        self.conns.pop(cid, None)

    def forget(self, conn: _Conn) -> None:
        for cid in conn.cids:
            if self.conns.get(cid) is conn:
                del self.conns[cid]

    async def datagram(self, data: bytes, addr) -> None:
        try:
            header = pull_quic_header(Buffer(data=data), host_cid_length=self.config.connection_id_length)
        except ValueError:
            return  # not QUIC: drop
        conn = self.conns.get(header.destination_cid)
        if conn is None:
            if header.version is not None and header.version not in self.config.supported_versions:
                await self.sock.sendto(encode_quic_version_negotiation(
                    source_cid=header.destination_cid, destination_cid=header.source_cid,
                    supported_versions=self.config.supported_versions), addr)
                return
            if header.packet_type != QuicPacketType.INITIAL or len(data) < 1200:
                return  # RFC 9000 14.1: a client's Initial is padded to 1200 bytes
            quic = QuicConnection(configuration=self.config, original_destination_connection_id=header.destination_cid)
            conn = _Conn(self, quic, addr)
            self.route(header.destination_cid, conn)
            self.route(quic.host_cid, conn)
            self.nursery.start_soon(conn.run)
        conn.datagram(data, addr)


async def serve_iggy_quic(broker, host: str, port: int, conn_nursery, *,
                          task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Bind UDP ``host:port`` (0 = a free port) and serve Iggy QUIC clients until
    cancelled. Supports ``nursery.start``; ``started()`` returns the bound port."""
    sock = trio.socket.socket(trio.socket.AF_INET6 if ":" in host else trio.socket.AF_INET, trio.socket.SOCK_DGRAM)
    with sock:
        await sock.bind((host, port))
        server = _Server(broker, sock, server_configuration(), conn_nursery)
        task_status.started(sock.getsockname()[1])
        while True:
            data, addr = await sock.recvfrom(MAX_DATAGRAM)
            await server.datagram(data, addr)


__all__ = ["serve_iggy_quic", "server_configuration"]
