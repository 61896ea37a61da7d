"""Who is on the other end of a connection's stream, for every driver.

The drivers (and the NATS monitor listener) name a connection by its peer:
the audit actor and the login guard (core/access.py ``bind_actor``), the
console's connection list (core/connections.py ``address``), Iggy's clients.
:func:`peer_of` finds that peer the one way for all of them; each caller keeps
its own wording for "no peer" (a memory stream in tests, a socket already gone).

It reads attributes only (no trio import): a stream adapted from a WebSocket
carries its own ``peer`` tuple (gateway/listeners/nats_ws.py); a
``trio.SSLStream`` has the TCP stream as ``transport_stream``; a
``trio.SocketStream`` has the ``socket``.
"""

from __future__ import annotations


def peer_of(stream) -> tuple[str, int] | None:
    """``(host, port)`` of the peer of ``stream``, or None when there is none to ask."""
    peer = getattr(stream, "peer", None)
    if not isinstance(peer, tuple):
        sock = getattr(getattr(stream, "transport_stream", stream), "socket", None)
        try:
            peer = sock.getpeername() if sock is not None else None
        except OSError:  # the peer already left (ENOTCONN)
            peer = None
    # IPv6 adds flowinfo and scope id (4-tuple); an AF_UNIX peer is a path, not an address.
    if not isinstance(peer, (tuple, list)) or not peer:
        return None
    return str(peer[0]), int(peer[1]) if len(peer) > 1 else 0


__all__ = ["peer_of"]
