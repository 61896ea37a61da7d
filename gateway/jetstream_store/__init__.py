"""The gateway's connection to a NATS JetStream cluster (issue 14, scale-out).

:mod:`.client` is the trio client for the hot path, :mod:`.blocking` a small
blocking client for rare metadata round trips, :mod:`.errors` what both raise.
Both speak the protocol through :mod:`adapters.nats.client_codec`.
"""
