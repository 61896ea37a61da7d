"""Rules several Iggy handler modules share: how missing entities answer per dialect (no trio).

``_not_found_is_empty``: GETs of one entity answer an empty OK when it (or a
parent) is missing. ``_current_codes``: dialect 3 answers a missing stream,
topic or group with the id variant of its code. ``_partition_plane``: dialect
3's partition-plane commands answer anything unresolved with 20
ResourceNotFound. Citations on each.
"""

from __future__ import annotations

import contextlib

from core import errors as ce

from .errors import CURRENT_DIALECT, IggyError, IggyStatus, status_for


def _not_found_is_empty(fn):
    """GETs of one entity answer an empty OK when it (or a parent) is missing
    (iggy.md 9.2; iggy-middle.md 9; iggy-current.md 8)."""

    def wrapper(s, v):
        try:
            return fn(s, v)
        except ce.NotFound:
            return b""
        except IggyStatus as err:
            if err.code in (IggyError.STREAM_ID_NOT_FOUND, IggyError.TOPIC_ID_NOT_FOUND,
                            IggyError.CONSUMER_GROUP_ID_NOT_FOUND):
                return b""
            raise

    return wrapper


def _current_codes(fn):
    """Dialect 3 answers a missing stream, topic or group with the id variant of its
    code whichever way the request named it (errors._CURRENT_NOT_FOUND); the other
    dialects keep the variant that matches the identifier."""

    def wrapper(s, v):
        try:
            return fn(s, v)
        except ce.NotFound as exc:
            if s.dialect != CURRENT_DIALECT:
                raise
            raise IggyStatus(status_for(exc, dialect=CURRENT_DIALECT), str(exc)) from None

    wrapper.__name__ = fn.__name__
    return wrapper


@contextlib.contextmanager
def _partition_plane(s):
    """SendMessages and Store/DeleteConsumerOffset of dialect 3: a stream, topic,
    partition or group the request names that does not resolve is 20 ResourceNotFound
    (apache/iggy core/server/src/dispatch.rs dispatch_partition_request: every
    ``resolve_partition_request_namespace`` error is denied with ResourceNotFound)."""
    if s.dialect != CURRENT_DIALECT:
        yield
        return
    try:
        yield
    except ce.NotFound as exc:
        raise IggyStatus(IggyError.RESOURCE_NOT_FOUND, str(exc)) from None
