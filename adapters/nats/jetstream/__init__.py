"""JetStream: a layer over core NATS, served from Ferry's log (docs/nats.md "JetStream").

The NATS session hands this package the subjects that are JetStream's (``$JS.API.*``,
``$JS.ACK.*``, ``$JS.FC.*``, ``DIRECT.GET``, publishes to a stream's subjects) through
:func:`session.route`; nothing here imports the session, so core NATS works without it.
``api`` routes the API, ``streams``/``index`` keep the streams, ``consumers`` the consumers
(with ``push``, ``pull``, ``consumer_store`` and ``retention``), ``errors`` is the one error table.
"""
