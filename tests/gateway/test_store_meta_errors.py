"""The metadata log's read-ahead before a write (``JetStreamStore.before_write``) turns a
JetStream API error into the core's StorageError, which every protocol answers as its own
retriable error: a fault-schedule run saw a Kafka OffsetCommit end its connection with the
raw ``ApiError: JetStream system temporarily unavailable (503/10008)`` instead of
COORDINATOR_NOT_AVAILABLE."""

from __future__ import annotations

import json

import pytest

from adapters.nats.client_codec import ServerMsg
from core.errors import StorageError
from gateway.jetstream_store.layout import Layout
from gateway.jetstream_store.store import JetStreamStore


class _Answers:
    """The blocking connection: answers every request with ``payload``."""

    def __init__(self, payload: dict) -> None:
        self.payload = json.dumps(payload).encode()
        self.asked: list[str] = []

    def request(self, subject, body=b"", header=None):
        self.asked.append(subject)
        return ServerMsg(subject="_INBOX.x", sid=1, reply=None, header=None, payload=self.payload)


def _store(answers: _Answers) -> JetStreamStore:
    store = object.__new__(JetStreamStore)   # only what before_write uses: no cluster connection
    store.layout = Layout("FT")
    store.blocking = answers
    return store


def test_jetstream_unavailable_before_a_metadata_write_is_a_storage_error():
    answers = _Answers({"type": "io.nats.jetstream.api.v1.stream_info_response",
                        "error": {"code": 503, "err_code": 10008,
                                  "description": "JetStream system temporarily unavailable"}})
    with pytest.raises(StorageError, match="temporarily unavailable"):
        _store(answers).before_write(object())
    assert answers.asked == ["$JS.API.STREAM.INFO.FT_META"]


def test_a_metadata_log_at_the_db_s_entry_applies_nothing():
    class Db:
        replica_seq = 7

    answers = _Answers({"type": "io.nats.jetstream.api.v1.stream_info_response", "state": {"last_seq": 7}})
    _store(answers).before_write(Db())
    assert answers.asked == ["$JS.API.STREAM.INFO.FT_META"]
