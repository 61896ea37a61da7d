"""Kafka listener adapter (protocols/kafka.md): Kafka's wire protocol for Kafka clients.

So far the sans-I/O codec: :mod:`adapters.kafka.messages` declares each API's
request and response once, as tables on the shared engine (adapters/wire/),
and :mod:`adapters.kafka.frames` splits the byte stream into size-prefixed
frames and reads request headers and bodies / writes response frames.
:mod:`adapters.kafka.errors` holds Kafka's error codes. Nothing here opens a
socket or imports trio; imports stay within adapters.wire and this package.
"""
