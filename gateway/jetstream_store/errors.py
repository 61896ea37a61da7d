"""Errors of the gateway's cluster clients (:mod:`gateway.jetstream_store.blocking`,
:mod:`gateway.jetstream_store.client`).

Plain ``Exception`` subclasses on purpose: they are not client-facing Ferry
errors (``core.errors``) but conditions the gateway maps itself (retry,
fail over, report unavailable).
"""

from __future__ import annotations


class ClusterUnreachable(Exception):
    """No URL of the cluster could be connected to; the message names every
    URL tried and why it failed (refused, timed out, ``Authorization Violation``...)."""


class NoResponders(Exception):
    """A request reached no subscriber: the server answered with a ``503``
    status (protocols/nats.md section 9). For ``$JS.API.*`` subjects this
    usually means JetStream is not enabled or has no leader yet."""


class SlowCluster(Exception):
    """The outbox would pass ``max_pending_bytes``: the cluster (or the network)
    does not take bytes as fast as they are produced. Nothing was queued."""


class ConnectionLost(Exception):
    """The connection dropped before a reply came (or while not connected);
    the request may or may not have reached the cluster."""


class ClusterServerError(Exception):
    """A non-fatal ``-ERR`` from the server about our operation, such as
    ``Permissions Violation for Publish to "x"``; the text is the server's."""


__all__ = ["ClusterServerError", "ClusterUnreachable", "ConnectionLost", "NoResponders", "SlowCluster"]
