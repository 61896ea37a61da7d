"""HTTP error messages name ids as the API numbers them (from 0: docs/http.md
"Numbering decision"), and the status line carries the standard reason phrase.

The ids asked for are taken from what the API itself answered at creation, so a
message that named a core-internal or 1-based number would not match."""

from __future__ import annotations

import socket

import httpx
import pytest

from ferry_harness import running_gateway


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    with running_gateway(tmp_path_factory.mktemp("ids")) as gw:
        base = f"http://127.0.0.1:{gw.ports['http']}"
        with httpx.Client(base_url=base, timeout=10) as h:
            token = h.post("/users/login", json={"username": "iggy", "password": "iggy"}).json()["access_token"]
            h.headers["authorization"] = f"Bearer {token['token']}"
            ids = {}
            for name in ("first", "second"):  # two streams: the second's id is not 0
                r = h.post("/streams", json={"name": name})
                assert r.status_code == 200, r.text
                ids[name] = r.json()["id"]
            for name in ("t0", "t1"):
                r = h.post("/streams/second/topics", json={"name": name, "partitions_count": 3,
                                                          "compression_algorithm": "none", "message_expiry": 0,
                                                          "max_topic_size": 0})
                assert r.status_code == 200, r.text
                ids[name] = r.json()["id"]
            r = h.post(f"/streams/{ids['second']}/topics/{ids['t1']}/consumer-groups", json={"name": "g"})
            assert r.status_code in (200, 201), r.text
            ids["g"] = r.json()["id"]
            yield h, ids, gw


def test_api_numbers_from_zero(api):
    _h, ids, _gw = api
    assert ids["first"] == 0 and ids["second"] == 1
    assert ids["t0"] == 0 and ids["t1"] == 1 and ids["g"] == 0


@pytest.mark.parametrize("method, path, body, status, iggy_id, reason", [
    ("DELETE", "/streams/{missing}", None, 404, 1009, "stream {missing} not found"),
    ("PUT", "/streams/{missing}", {"name": "x"}, 404, 1009, "stream {missing} not found"),
    ("DELETE", "/streams/{second}/topics/{missing}", None, 404, 2010,
     "topic {missing} not found in stream {second}"),
    # partition ids are 0-based: topic t1 has partitions 0, 1, 2, so 3 is the first missing one
    ("GET", "/streams/{second}/topics/{t1}/messages?consumer_id=1&partition_id=3&kind=offset&value=0&count=1",
     None, 404, 3007, "partition 3 not found in topic 't1'"),
    ("POST", "/streams/{second}/topics/{t1}/messages",
     {"partitioning": {"kind": "partition_id", "value": "AwAAAA=="}, "messages": [{"payload": "eA=="}]},
     404, 3007, "partition 3 not found in topic 't1'"),
    ("DELETE", "/streams/{second}/topics/{t1}/consumer-groups/{missing}", None, 404, 5000,
     "consumer group {missing} not found"),
])
def test_not_found_errors_name_api_ids(api, method, path, body, status, iggy_id, reason):
    h, ids, _gw = api
    names = {**ids, "missing": 7}
    r = h.request(method, path.format(**names), json=body)
    assert r.status_code == status, r.text
    got = r.json()
    assert got["id"] == iggy_id
    assert got["reason"] == reason.format(**names)


def test_partition_id_that_exists_is_served(api):
    """The message names 3 as missing because 2 (the last, 0-based) is there."""
    h, ids, _gw = api
    r = h.get(f"/streams/{ids['second']}/topics/{ids['t1']}/messages",
              params={"consumer_id": 1, "partition_id": 2, "kind": "offset", "value": 0, "count": 1})
    assert r.status_code == 200, r.text
    assert r.json()["partition_id"] == 2


def raw_status_line(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(request)
        return s.makefile("rb").readline()


@pytest.mark.parametrize("request_bytes, line", [
    (b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n", b"HTTP/1.1 200 OK\r\n"),
    (b"GET /no/such/path HTTP/1.1\r\nHost: x\r\n\r\n", b"HTTP/1.1 404 Not Found\r\n"),
    (b"GET /streams HTTP/1.1\r\nHost: x\r\n\r\n", b"HTTP/1.1 401 Unauthorized\r\n"),
    (b"PATCH /ping HTTP/1.1\r\nHost: x\r\n\r\n", b"HTTP/1.1 405 Method Not Allowed\r\n"),
    (b"GET /ping HTTP/1.1\r\n\r\n", b"HTTP/1.1 400 Bad Request\r\n"),  # no Host: h11 refuses it
])
def test_status_lines_carry_the_reason_phrase(api, request_bytes, line):
    _h, _ids, gw = api
    assert raw_status_line(gw.ports["http"], request_bytes) == line
