"""The Pravega adapter's error family.

Theory of operation
-------------------
The upstream segment store answers a malformed or out-of-order frame by
closing the connection without a reply (pravega.md sections 1 and 5.2:
netty's length-field decoder, ``CommandDecoder`` and ``AppendDecoder`` throw,
and the channel is closed). :class:`PravegaProtocolError` is that case: the
codec raises it, the connection logs ``reason`` and closes. Replies that
keep the connection open (``NoSuchSegment``, ``ErrorMessage``, ...) are
commands, not exceptions.
"""

from __future__ import annotations


class PravegaProtocolError(Exception):
    """The peer broke the wire protocol; close the connection (nothing goes on the wire).

    ``reason`` says what was wrong, for logs and tests; it is never sent."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


__all__ = ["PravegaProtocolError"]


class Reply(Exception):
    """Answer this command with ``reply`` (an error command) and carry on: raised by
    the session's handlers (session.py, tables.py), caught in one place."""

    def __init__(self, reply) -> None:
        super().__init__(type(reply).__name__)
        self.reply = reply
