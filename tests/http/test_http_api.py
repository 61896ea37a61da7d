"""Iggy's HTTP API through httpx, over HTTP/1.1 and HTTP/2 (h2c prior knowledge)."""

from __future__ import annotations

import pytest
import trio

from http_helpers import TEST_LIMIT_S, b64, client, gateway, login, make_topic, partition_value

pytestmark = pytest.mark.parametrize("http2", [False, True], ids=["h1", "h2"])


async def test_streams_topics_partitions(tmp_path, http2):
    with trio.fail_after(TEST_LIMIT_S):
        async with gateway(tmp_path) as port, client(port, http2=http2) as c:
            await login(c)
            topic = await make_topic(c, "orders", "eu", partitions=3)
            assert topic["id"] == 1 and topic["partitions_count"] == 3
            assert [p["id"] for p in topic["partitions"]] == [1, 2, 3]
            assert topic["size"] == "0 B" and topic["message_expiry"] == 2**64 - 1
            r = await c.get("/streams")
            assert [s["name"] for s in r.json()] == ["orders"]
            assert list(r.json()[0]) == ["id", "created_at", "name", "size", "messages_count", "topics_count"]
            r = await c.get("/streams/1")
            assert r.json()["topics"][0]["name"] == "eu"
            assert (await c.get("/streams/orders/topics/eu")).json()["id"] == 1
            # missing single entity: Iggy's generic 404
            r = await c.get("/streams/99")
            assert r.status_code == 404 and r.json() == {"id": 404, "code": "not_found",
                                                         "reason": "Resource not found", "field": None}
            # missing parent on a collection: the specific Iggy error
            r = await c.get("/streams/99/topics")
            assert r.status_code == 404 and r.json()["id"] == 1009 and r.json()["field"] == "stream_id"
            r = await c.get("/streams/nope/topics")
            assert r.status_code == 400 and r.json()["id"] == 1010
            r = await c.post("/streams", json={"name": "orders"})
            assert r.status_code == 400 and r.json()["id"] == 1012 and r.json()["field"] == "name"
            r = await c.post("/streams/orders/topics/eu/partitions", json={"partitions_count": 2})
            assert r.status_code == 201 and r.content == b""
            r = await c.delete("/streams/orders/topics/eu/partitions", params={"partitions_count": 4})
            assert r.status_code == 204
            assert (await c.get("/streams/1/topics/1")).json()["partitions_count"] == 1
            r = await c.put("/streams/1/topics/1", json={"name": "west", "compression_algorithm": "GZIP",
                                                          "message_expiry": 0, "max_topic_size": 0})
            assert r.status_code == 204
            assert (await c.get("/streams/1/topics/west")).json()["compression_algorithm"] == "gzip"
            assert (await c.put("/streams/1", json={"name": "sales"})).status_code == 204
            assert (await c.delete("/streams/sales/topics/west/purge")).status_code == 204
            assert (await c.delete("/streams/sales/purge")).status_code == 204
            assert (await c.delete("/streams/sales/topics/west")).status_code == 204
            assert (await c.delete("/streams/sales")).status_code == 204
            assert (await c.get("/streams")).json() == []


async def test_send_and_poll_with_typed_headers(tmp_path, http2):
    headers = {
        "s": {"kind": "string", "value": b64("hello")},
        "b": {"kind": "bool", "value": b64(b"\x01")},
        "u64": {"kind": "uint64", "value": b64((123456).to_bytes(8, "little"))},
        "f": {"kind": "float64", "value": b64(b"\x00" * 7 + b"\x40")},
        "r": {"kind": "raw", "value": b64(b"\x00\xff")},
    }
    with trio.fail_after(TEST_LIMIT_S):
        async with gateway(tmp_path) as port, client(port, http2=http2) as c:
            await login(c)
            await make_topic(c, partitions=2)
            body = {"partitioning": {"kind": "partition_id", "value": partition_value(2)},
                    "messages": [{"id": 0, "payload": b64("one")},
                                 {"id": 2**127 + 5, "payload": b64("two"), "headers": headers}]}
            r = await c.post("/streams/s1/topics/t1/messages", json=body)
            assert r.status_code == 201 and r.content == b""
            r = await c.get("/streams/s1/topics/t1/messages",
                            params={"partition_id": 2, "kind": "offset", "value": 0, "count": 10})
            assert r.status_code == 200, r.text
            data = r.json()
            assert data["partition_id"] == 2 and data["current_offset"] == 1
            m0, m1 = data["messages"]
            assert m0["offset"] == 0 and m0["payload"] == b64("one") and m0["headers"] is None and m0["id"] > 0
            assert m1["id"] == 2**127 + 5 and m1["headers"] == headers and m1["state"] == "available"
            import zlib
            assert m1["checksum"] == zlib.crc32(b"two")
            # balanced and messages_key partitioning
            for part in ({"kind": "balanced", "value": ""}, {"kind": "messages_key", "value": b64("k")}):
                r = await c.post("/streams/s1/topics/t1/messages",
                                 json={"partitioning": part, "messages": [{"payload": b64("x")}]})
                assert r.status_code == 201, r.text
            # last / next / auto_commit and consumer offsets
            r = await c.get("/streams/s1/topics/t1/messages",
                            params={"partition_id": 2, "kind": "last", "count": 1})
            assert [m["offset"] for m in r.json()["messages"]] == [r.json()["current_offset"]]
            r = await c.get("/streams/s1/topics/t1/messages",
                            params={"partition_id": 2, "kind": "next", "count": 1, "auto_commit": "true",
                                    "id": "7"})
            assert [m["offset"] for m in r.json()["messages"]] == [0]
            r = await c.get("/streams/s1/topics/t1/consumer-offsets", params={"id": "7", "partition_id": 2})
            assert r.json() == {"partition_id": 2, "current_offset": r.json()["current_offset"],
                                "stored_offset": 0}
            r = await c.put("/streams/s1/topics/t1/consumer-offsets",
                            json={"id": "7", "partition_id": 2, "offset": 1})
            assert r.status_code == 204
            r = await c.get("/streams/s1/topics/t1/messages",
                            params={"partition_id": 2, "kind": "n", "count": 5, "id": "7"})
            assert [m["offset"] for m in r.json()["messages"]] == list(range(2, r.json()["current_offset"] + 1))
            r = await c.delete("/streams/s1/topics/t1/consumer-offsets/7", params={"partition_id": 2})
            assert r.status_code == 204
            r = await c.get("/streams/s1/topics/t1/consumer-offsets", params={"id": "7", "partition_id": 2})
            assert r.status_code == 404
            r = await c.delete("/streams/s1/topics/t1/consumer-offsets/7", params={"partition_id": 2})
            assert r.status_code == 404 and r.json()["id"] == 3021
            r = await c.get("/streams/s1/topics/t1/messages/flush/1/true")
            assert r.status_code == 200


async def test_consumer_groups(tmp_path, http2):
    with trio.fail_after(TEST_LIMIT_S):
        async with gateway(tmp_path) as port, client(port, http2=http2) as c:
            await login(c)
            await make_topic(c, partitions=2)
            g = "/streams/s1/topics/t1/consumer-groups"
            r = await c.post(g, json={"name": "workers"})
            assert r.status_code == 201 and r.json() == {"id": 1, "name": "workers", "partitions_count": 2,
                                                         "members_count": 0, "members": []}
            r = await c.post(g, json={"name": "workers"})
            assert r.status_code == 400 and r.json()["id"] == 5004
            assert [x["name"] for x in (await c.get(g)).json()] == ["workers"]
            assert (await c.get(g + "/workers")).json()["id"] == 1
            assert (await c.get(g + "/9")).status_code == 404
            assert (await c.delete(g + "/1")).status_code == 204
            assert (await c.get(g)).json() == []
