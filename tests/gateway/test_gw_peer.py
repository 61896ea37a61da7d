"""adapters.peer.peer_of: the one way every driver finds a connection's peer."""

from __future__ import annotations

from adapters.peer import peer_of
from core.connections import address


class FakeSocket:
    def __init__(self, peer=None, error: bool = False) -> None:
        self.peer, self.error = peer, error

    def getpeername(self):
        if self.error:
            raise OSError(107, "Transport endpoint is not connected")
        return self.peer


class SocketStream:  # trio.SocketStream's shape
    def __init__(self, sock) -> None:
        self.socket = sock


class TlsStream:  # trio.SSLStream's shape: no socket, the TCP stream underneath
    def __init__(self, transport) -> None:
        self.transport_stream = transport


class Adapted:  # a WebSocket adapted to a byte stream (gateway/listeners/nats_ws.py)
    def __init__(self, peer) -> None:
        self.peer = peer


def test_socket_tls_and_adapted_streams():
    assert peer_of(SocketStream(FakeSocket(("10.0.0.1", 4222)))) == ("10.0.0.1", 4222)
    assert peer_of(TlsStream(SocketStream(FakeSocket(("10.0.0.2", 8090))))) == ("10.0.0.2", 8090)
    assert peer_of(Adapted(("10.0.0.3", 443))) == ("10.0.0.3", 443)


def test_ipv6_keeps_host_and_port():
    peer = peer_of(SocketStream(FakeSocket(("::1", 5000, 0, 0))))
    assert peer == ("::1", 5000)
    assert address(peer) == "[::1]:5000"


def test_no_peer_is_none():
    assert peer_of(object()) is None  # a memory stream in tests
    assert peer_of(SocketStream(FakeSocket(error=True))) is None  # the peer already left
    assert peer_of(SocketStream(FakeSocket("/tmp/sock"))) is None  # AF_UNIX: a path, not an address
    assert address(peer_of(object())) == ""  # what nats_monitor shows then
