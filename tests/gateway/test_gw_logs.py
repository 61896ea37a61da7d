"""gateway.logs: text and JSON renderings of structured records."""

from __future__ import annotations

import io
import json
import logging

import pytest

from gateway import logs


@pytest.fixture
def capture():
    stream = io.StringIO()
    logger = logging.getLogger("ferry")
    saved = (logger.level, logger.propagate, list(logger.handlers))
    yield stream
    logger.handlers[:] = saved[2]
    logger.setLevel(saved[0])
    logger.propagate = saved[1]


def test_text_format_appends_key_value_fields(capture):
    logs.configure("info", "text", capture)
    logging.getLogger("ferry.gateway").info("listener started", extra={"listener": "nats", "port": 4222,
                                                                       "note": "two words"})
    line = capture.getvalue().strip()
    assert line.endswith('ferry.gateway listener started listener=nats port=4222 note="two words"')
    assert " INFO " in line and line[:4].isdigit() and line.split()[0].endswith("Z")


def test_json_format_is_one_object_per_line(capture):
    logs.configure("debug", "json", capture)
    log = logging.getLogger("ferry.broker")
    log.debug("opened", extra={"path": "/data", "partitions": 3})
    log.warning("odd %s", "thing", extra={"obj": object()})
    first, second = [json.loads(line) for line in capture.getvalue().splitlines()]
    assert first["level"] == "debug" and first["logger"] == "ferry.broker" and first["msg"] == "opened"
    assert (first["path"], first["partitions"]) == ("/data", 3)
    assert second["msg"] == "odd thing" and second["obj"].startswith("<object")


def test_exceptions_are_attached(capture):
    logs.configure("info", "json", capture)
    try:
        raise ValueError("bad")
    except ValueError:
        logging.getLogger("ferry.x").exception("failed")
    obj = json.loads(capture.getvalue())
    assert "ValueError: bad" in obj["exc"]


def test_level_filters_and_reconfigure_does_not_double(capture):
    logs.configure("warning", "text", capture)
    logs.configure("warning", "text", capture)
    log = logging.getLogger("ferry.y")
    log.info("hidden")
    log.error("shown")
    assert capture.getvalue().count("shown") == 1 and "hidden" not in capture.getvalue()


def test_unknown_format_is_refused():
    with pytest.raises(ValueError, match="text, json"):
        logs.make_formatter("xml")
