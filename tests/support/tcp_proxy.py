"""A TCP proxy for tests that stand between a client and a server and misbehave on cue.

``TcpProxy(target)`` listens (127.0.0.1, a free port unless ``listen`` is given) and
pumps each accepted connection to ``target`` with two threads, one per direction.
Every chunk goes through :meth:`TcpProxy.relay`, which a subclass overrides to hold
it back, count it or cut the connection (return False: both sides are shut down).
``close()`` stops listening and closes every socket it made."""

from __future__ import annotations

import socket
import threading


class TcpProxy:
    def __init__(self, target: tuple[str, int], listen: tuple[str, int] = ("127.0.0.1", 0)) -> None:
        self.target = target
        self.server = socket.create_server(listen)
        self.port = self.server.getsockname()[1]
        self.lock = threading.Lock()
        self.socks: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def relay(self, data: bytes, dst: socket.socket, from_client: bool, state: dict) -> bool:
        """Forward one chunk; ``state`` is this direction's of this connection. False cuts."""
        dst.sendall(data)
        return True

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
                upstream = socket.create_connection(self.target)
            except OSError:
                return
            self.socks += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, from_client: bool) -> None:
        state: dict = {}
        try:
            while data := src.recv(65536):
                if not self.relay(data, dst, from_client, state):
                    return
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self.server.close()
        for s in self.socks:
            s.close()
