"""adapters.nats.errors: wire forms, Go %q quoting, the core-error mapping table."""

from __future__ import annotations

import pytest

from adapters.nats.errors import (
    NatsErrorReply,
    NatsHeaderError,
    NatsLocalProtocolError,
    NatsProtocolError,
    err_frame,
    from_core_error,
    go_quote,
    publish_violation,
    reply_violation,
    subscribe_violation,
)
from core.errors import (
    InvalidCredentials,
    InvalidSubject,
    PayloadTooLarge,
    PermissionDenied,
    StreamNotFound,
)


def test_wire_forms():
    assert NatsProtocolError("Stale Connection").wire == b"-ERR 'Stale Connection'\r\n"
    assert NatsProtocolError(None, "bad PUB").wire == b""
    assert NatsErrorReply("Invalid Subject").wire == b"-ERR 'Invalid Subject'\r\n"
    assert NatsLocalProtocolError("bug").wire == b""
    assert isinstance(NatsHeaderError("x"), ValueError)
    assert (NatsProtocolError("x").fatal, NatsErrorReply("x").fatal) == (True, False)
    assert err_frame("a'b") == b"-ERR 'a'b'\r\n"   # nats-server does not escape inside the quotes


@pytest.mark.parametrize(("text", "quoted"), [
    ("foo.bar", '"foo.bar"'),
    ('a"b', '"a\\"b"'),
    ("a\\b", '"a\\\\b"'),
    ("é.ü", '"é.ü"'),
    ("a\x00b\x7f", '"a\\x00b\\x7f"'),
    ("\t\n\r\a\b\f\v", '"\\t\\n\\r\\a\\b\\f\\v"'),
    (b"a\xffb".decode("utf-8", "surrogateescape"), '"a\\xffb"'),
    ("\u200b", '"\\u200b"'),
    ("\U000e0001", '"\\U000e0001"'),
])
def test_go_quote(text, quoted):
    """Go strconv.Quote, as nats-server's %q formats subjects."""
    assert go_quote(text) == quoted


def test_permission_texts():
    assert publish_violation("foo") == 'Permissions Violation for Publish to "foo"'
    assert reply_violation("_R_.x") == 'Permissions Violation for Publish with Reply of "_R_.x"'
    assert subscribe_violation("foo") == 'Permissions Violation for Subscription to "foo"'
    assert subscribe_violation("foo", "q") == 'Permissions Violation for Subscription to "foo" using queue "q"'


def test_core_error_table():
    fatal = from_core_error(InvalidCredentials("bad"))
    assert isinstance(fatal, NatsProtocolError) and fatal.text == "Authorization Violation"
    assert from_core_error(PayloadTooLarge()).text == "Maximum Payload Violation"
    reply = from_core_error(InvalidSubject("x"))
    assert isinstance(reply, NatsErrorReply) and reply.text == "Invalid Subject"
    denied = from_core_error(PermissionDenied(), subject="a.b", publish=True)
    assert denied.text == 'Permissions Violation for Publish to "a.b"' and not denied.fatal
    denied = from_core_error(PermissionDenied(), subject="a.b", queue="q", publish=False)
    assert denied.text == 'Permissions Violation for Subscription to "a.b" using queue "q"'
    unmapped = from_core_error(StreamNotFound("s"))
    assert isinstance(unmapped, NatsLocalProtocolError) and unmapped.wire == b""
