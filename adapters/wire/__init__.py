"""Shared wire machinery that no single adapter owns.

Used by Iggy, Pravega and Kafka. Modelled on Kafka's message specs: a
protocol declares each message once, as a table of typed fields, and the
encoder, the decoder, the dataclass and the hypothesis test strategy are
derived from that declaration. Nothing here knows a protocol; each adapter
passes its own conventions (:class:`~adapters.wire.types.Wire`: byte order,
its decode error, its version and command-code spaces).

* :mod:`adapters.wire.types`: the field-type protocol (``WireType``) and the
  primitive types (integers, varints, floats, flags, length-prefixed bytes,
  text and lists, nullable or not, records, UUIDs), built per byte order and
  error factory;
* :mod:`adapters.wire.table`: ``Field``, ``Struct``, ``Command``,
  ``CommandTable``: layouts declared by fields, checked when they load;
  versioned ones may resolve field types per version, nest structs and end
  with a tagged-field section (Kafka's flexible versions);
* :mod:`adapters.wire.h2pump`: the sans-I/O HTTP/2 send pump (bodies wait for
  flow-control window), used by adapters/http and Pravega's gRPC controller.

Like the codecs that use it, nothing here imports trio.
"""
