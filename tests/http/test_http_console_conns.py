"""The console's Connections and Errors endpoints (adapters/http/routes_console_conns.py) over a
live gateway with the HTTP listener: each connection's counts agree with /metrics, errors are
listed with their address and reason, closing needs manage_servers and is audited, and a user
without read_servers sees nothing.
"""

from __future__ import annotations

import logging

import trio

from http_helpers import TEST_LIMIT_S, b64, client, gateway, login, make_topic, partition_value


async def user_client(c, port, name: str, permissions):
    """A new user with ``permissions`` and a client logged in as it (the caller closes it)."""
    r = await c.post("/users", json={"username": name, "password": "secret1", "status": "active",
                                     "permissions": permissions})
    assert r.status_code == 200, r.text
    other = client(port)
    await login(other, {"username": name, "password": "secret1"})
    return other


def metric(text: str, family: str, listener: str = "http") -> float:
    for line in text.splitlines():
        if line.startswith(f'{family}{{listener="{listener}"}} '):
            return float(line.split()[-1])
    return 0.0


async def test_connections_counts_errors_and_close(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="ferry.audit")
    with trio.fail_after(TEST_LIMIT_S):
        async with gateway(tmp_path) as port, client(port) as admin, client(port) as producer:
            await login(admin)
            await login(producer)
            await make_topic(admin)
            r = await producer.post("/streams/s1/topics/t1/messages", json={
                "partitioning": {"kind": "partition_id", "value": partition_value(0)},
                "messages": [{"payload": b64("hello %d" % i)} for i in range(3)]})
            assert r.status_code == 201, r.text
            r = await producer.get("/streams/no-such-stream")
            assert r.status_code == 404

            got = (await admin.get("/console/api/connections")).json()
            rows = got["connections"]
            assert got["total"] == len(rows) == 2
            mine = [c for c in rows if c["messages_in"] == 3]
            assert len(mine) == 1, rows
            prod = mine[0]
            assert prod["listener"] == "http" and prod["user"] == "iggy" and prod["client"].startswith("python-httpx/")
            assert prod["bytes_in"] == sum(len(b"hello %d" % i) for i in range(3)) and prod["errors"] == 1
            text = (await admin.get("/metrics")).text
            assert metric(text, "ferry_messages_in_total") == sum(c["messages_in"] for c in rows) == 3
            assert metric(text, "ferry_bytes_in_total") == prod["bytes_in"]
            assert metric(text, "ferry_errors_total") == sum(c["errors"] for c in rows) == 1

            errors = (await admin.get("/console/api/errors")).json()
            (err,) = errors["errors"]
            assert err["listener"] == "http" and err["remote"] == prod["remote"]
            assert err["message"].startswith("404 ") and errors["limit"] > 0

            # -- permissions: nothing without read_servers; closing needs manage_servers
            nobody = await user_client(admin, port, "nobody", None)
            reader = await user_client(admin, port, "reader", {"global": {"read_servers": True}})
            try:
                for path in ("/console/api/connections", "/console/api/errors"):
                    assert (await nobody.get(path)).status_code == 403
                    assert (await reader.get(path)).status_code == 200
                assert (await reader.delete(f"/console/api/connections/{prod['id']}")).status_code == 403
                assert (await nobody.delete(f"/console/api/connections/{prod['id']}")).status_code == 403
            finally:
                await nobody.aclose()
                await reader.aclose()
            assert any(r.getMessage() == "audit" and getattr(r, "event", "") == "denied" for r in caplog.records)

            # -- closing
            own = [c for c in (await admin.get("/console/api/connections")).json()["connections"]
                   if c["id"] != prod["id"] and c["user"] == "iggy" and c["messages_in"] == 0]
            assert (await admin.delete(f"/console/api/connections/{own[0]['id']}")).status_code == 400
            assert (await admin.delete("/console/api/connections/999999")).status_code == 404
            assert (await admin.delete("/console/api/connections/abc")).status_code == 400
            assert (await admin.delete(f"/console/api/connections/{prod['id']}")).status_code == 204
            ids = {c["id"] for c in (await admin.get("/console/api/connections")).json()["connections"]}
            while prod["id"] in ids:   # the driver ends it on its own task: poll until it did
                await trio.sleep(0.02)
                ids = {c["id"] for c in (await admin.get("/console/api/connections")).json()["connections"]}
            closes = [r for r in caplog.records if getattr(r, "event", "") == "connection.close"]
            assert len(closes) == 1 and closes[0].connection == prod["id"] and closes[0].user == "iggy"
            # the producer's client reconnects: a new connection, counted from zero
            assert (await producer.get("/streams")).status_code == 200
            rows = (await admin.get("/console/api/connections")).json()["connections"]
            assert prod["id"] not in {c["id"] for c in rows} and all(c["messages_in"] == 0 for c in rows)
