"""The console's readers endpoints (adapters/http/routes_console_readers.py), without a browser.

* Pravega reader groups from their table as the real 0.3.8 client wrote it: the entries
  below are the bytes a run of tests/pravega/clients/console_readers.py-like steps left in
  ``sc/rg_kvtable/0.#epoch.0`` (two segments, reader ``r1``), once with the reader online
  and once after it went offline; the lag is placed on the topic's partitions.
* A live gateway with every listener: an Iggy topic with a group and a plain consumer's
  stored offset (HTTP API), a JetStream stream with a pull consumer and a KV bucket
  (nats-py). Each user sees exactly what it may read: a user limited to one Iggy stream
  sees nothing of JetStream, one that may read every topic but poll none sees KV keys
  without values.
"""

from __future__ import annotations

import asyncio
import base64
import json

import httpx
import nats
import trio

from adapters.http.app import HttpApp
from adapters.http.events import Request
from adapters.http.routes_console_readers import MAX_VALUE_PREVIEW
from adapters.http.tokens import TokenService
from adapters.pravega.readergroups import CborError, cbor_decode
from console_cdp import STEP_LIMIT_S, full_gateway
from core.broker import Broker, BrokerConfig
from core.log import AppendInput, LogConfig
from core.metrics import MetricsRegistry
from core.permissions import Permissions

TABLE = "sc/rg_kvtable/0.#epoch.0"
_CONFIG = ("a267747970655f6964781a52656164657247726f7570436f6e66696756657273696f6e65646464617461987718a11862"
           "1856183118a31878181918671872186f18751870185f1872186518661872186518731868185f18741869186d1865185f"
           "186d1869186c186c1869187318190b18b81874187318741861187218741869186e1867185f1873187418721865186118"
           "6d185f186318751874187318a118a2186518731863186f1870186518a11864186e1861186d1865186218731863186618"
           "731874187218651861186d18a11864186e1861186d186518621873187418691855186e1862186f1875186e1864186518"
           "6418721865186e18641869186e1867185f18731874187218651861186d185f186318751874187318a0")
_BLOB = "a267747970655f696464626c6f6264646174618100"   # a map's marker
_TOMB = "a267747970655f696469746f6d6273746f6e6564646174618118a0"
# reader r1 holding both segments, positions not written back yet (0)
_ASSIGNED = ("a267747970655f6964781e486173684d61703c53636f7065645365676d656e742c204f66667365743e6464617461987f"
             "18a218a3186518731863186f1870186518a11864186e1861186d1865186218731863186618731874187218651861186d"
             "18a11864186e1861186d18651862187318741867187318651867186d1865186e187418a21866186e1875186d18621865"
             "187201186518741878185f1869186418f618a1186418721865186118640018a3186518731863186f1870186518a11864"
             "186e1861186d1865186218731863186618731874187218651861186d18a11864186e1861186d18651862187318741867"
             "187318651867186d1865186e187418a21866186e1875186d18621865187200186518741878185f1869186418f618a118"
             "64187218651861186400")
_DISTANCE_UNMEASURED = "a267747970655f696463753634646461746189181b18ff18ff18ff18ff18ff18ff18ff18ff"
_OFFSET_20 = "a267747970655f6964664f666673657464646174618718a11864187218651861186414"
_OFFSET_0 = "a267747970655f6964664f666673657464646174618718a11864187218651861186400"


def _key(text: str) -> bytes:
    return bytes([0x60 + len(text)]) + text.encode() if len(text) < 24 else bytes([0x78, len(text)]) + text.encode()


ONLINE = [("06config/default", _CONFIG), ("06config", _BLOB),
          ("16distance_to_tail/r1", _DISTANCE_UNMEASURED), ("16distance_to_tail", _BLOB),
          ("19unassigned_segments/sc/st/0.#epoch.0", _TOMB),
          ("17assigned_segments/r1", _ASSIGNED), ("17assigned_segments", _BLOB),
          ("19unassigned_segments/sc/st/1.#epoch.0", _TOMB), ("19unassigned_segments", _BLOB)]
OFFLINE = [("06config/default", _CONFIG), ("06config", _BLOB),
           ("19unassigned_segments/sc/st/0.#epoch.0", _OFFSET_20),
           ("19unassigned_segments/sc/st/1.#epoch.0", _OFFSET_0), ("19unassigned_segments", _BLOB),
           ("17assigned_segments/r1", _TOMB), ("17assigned_segments", _BLOB),
           ("16distance_to_tail/r1", _TOMB), ("16distance_to_tail", _BLOB)]


def _get(app: HttpApp, token: str, target: str) -> tuple[int, dict]:
    req = Request(1, "GET", target, ((b"authorization", b"Bearer " + token.encode()),), b"", "1.1")
    resp = app.handle(req)
    return resp.status, json.loads(resp.body) if resp.body else None


def _token(broker, tokens, user) -> str:
    return tokens.issue(user.id, user_created_at=user.created_at)[0]


def test_cbor_decoder_refuses_what_the_client_never_writes():
    assert cbor_decode(bytes.fromhex(_OFFSET_20))["type_id"] == "Offset"
    for bad in (b"", b"\x9f", b"\x62a", b"\x18", b"\x00\x00", b"\x81" * 40 + b"\x00"):  # cut, indefinite, deep
        try:
            cbor_decode(bad)
        except CborError:
            continue
        raise AssertionError(f"{bad!r} decoded")


def test_pravega_reader_group_positions_and_permissions(tmp_path):
    broker = Broker.open(tmp_path / "data", BrokerConfig(log=LogConfig(fsync="never")))
    try:
        tokens = TokenService(b"k" * 32)
        app = HttpApp(broker, tokens, MetricsRegistry())
        root = broker.meta.users.list_users()[0]
        s = broker.create_stream("sc")
        t = broker.create_topic(s.id, "st", 2)
        other = broker.create_stream("other")
        broker.append(s.id, t.id, [AppendInput(b"e%d" % i) for i in range(5)], partition=0)  # 10 bytes each
        broker.append(s.id, t.id, [AppendInput(b"zz")], partition=1)
        broker.tables.create(TABLE)
        broker.tables.update(TABLE, [(_key(k), bytes.fromhex(v), -(1 << 63)) for k, v in ONLINE])

        status, body = _get(app, _token(broker, tokens, root), "/console/api/consumers")
        assert status == 200
        (group,) = body["pravega"]["groups"]
        assert (group["scope"], group["name"], group["readers"], group["streams"]) == ("sc", "rg", ["r1"], ["sc/st"])
        assert group["distance_to_tail"] == {}  # u64::MAX: the client has not measured it
        assert [(x["segment"], x["reader"], x["position"], x["lag_events"], x["lag_bytes"])
                for x in group["segments"]] == [("sc/st/0.#epoch.0", "r1", 0, 5, 50),
                                                ("sc/st/1.#epoch.0", "r1", 0, 1, 10)]

        broker.tables.update(TABLE, [(_key(k), bytes.fromhex(v), -(1 << 63)) for k, v in OFFLINE])
        (group,) = _get(app, _token(broker, tokens, root), "/console/api/consumers")[1]["pravega"]["groups"]
        assert group["readers"] == [] and group["problems"] == []
        assert [(x["segment"], x["reader"], x["position"], x["end"], x["lag_events"], x["lag_bytes"])
                for x in group["segments"]] == [("sc/st/0.#epoch.0", None, 20, 50, 3, 30),
                                                ("sc/st/1.#epoch.0", None, 0, 10, 1, 10)]
        assert (group["lag_events"], group["lag_bytes"]) == (4, 40)

        # a user who may read only the other stream sees no group; one who may read sc/st does
        outsider = broker.meta.users.create_user("outsider", "secret-1", permissions=Permissions.from_json(json.dumps(
            {"streams": {str(other.id): {"read_topics": True}}})))
        reader = broker.meta.users.create_user("reader", "secret-2", permissions=Permissions.from_json(json.dumps(
            {"streams": {str(s.id): {"read_topics": True}}})))
        assert _get(app, _token(broker, tokens, outsider), "/console/api/consumers")[1]["pravega"]["groups"] == []
        assert len(_get(app, _token(broker, tokens, reader), "/console/api/consumers")[1]["pravega"]["groups"]) == 1
    finally:
        broker.close()


def _nats_setup(url: str) -> None:
    async def main():
        nc = await nats.connect(url)
        js = nc.jetstream()
        await js.add_stream(name="ORDERS", subjects=["orders.>"])
        for i in range(5):
            await js.publish(f"orders.{i}", b"o")
        sub = await js.pull_subscribe("orders.>", durable="worker")
        msgs = await sub.fetch(3, timeout=STEP_LIMIT_S)
        for m in msgs[:2]:
            await m.ack_sync()
        kv = await js.create_key_value(bucket="cfg", history=3)
        await kv.put("big", b"v" * (MAX_VALUE_PREVIEW + 10))
        await kv.put("gone", b"x")
        await kv.delete("gone")
        await nc.close()

    asyncio.run(asyncio.wait_for(main(), STEP_LIMIT_S))


async def test_live_readers_filtered_per_user(tmp_path):
    with trio.fail_after(STEP_LIMIT_S * 2):
        async with full_gateway(tmp_path) as ports, \
                httpx.AsyncClient(base_url=f"http://127.0.0.1:{ports['http']}", timeout=STEP_LIMIT_S) as c:
            async def login(user, password):
                r = await c.post("/users/login", json={"username": user, "password": password})
                assert r.status_code == 200, r.text
                return {"authorization": "Bearer " + r.json()["access_token"]["token"]}

            root = await login("iggy", "iggy")
            assert (await c.post("/streams", json={"name": "shop"}, headers=root)).status_code == 200
            assert (await c.post("/streams/shop/topics", headers=root, json={
                "name": "orders", "partitions_count": 2, "compression_algorithm": "none", "message_expiry": 0,
                "max_topic_size": 0})).status_code in (200, 201)
            payloads = [{"payload": base64.b64encode(b"m%d" % i).decode()} for i in range(5)]
            r = await c.post("/streams/shop/topics/orders/messages", headers=root, json={
                "partitioning": {"kind": "partition_id", "value": base64.b64encode(b"\0\0\0\0").decode()},
                "messages": payloads})
            assert r.status_code == 201, r.text
            r = await c.post("/streams/shop/topics/orders/consumer-groups", json={"name": "billing"}, headers=root)
            assert r.status_code == 201, r.text
            r = await c.put("/streams/shop/topics/orders/consumer-offsets", headers=root,
                            json={"consumer_id": "7", "partition_id": 0, "offset": 2})
            assert r.status_code == 204, r.text
            await trio.to_thread.run_sync(_nats_setup, f"nats://iggy:iggy@127.0.0.1:{ports['nats']}")

            got = (await c.get("/console/api/consumers", headers=root)).json()
            (group,) = got["iggy"]["groups"]
            assert (group["name"], group["lag"], group["members"]) == ("billing", 5, 0)
            assert [(p["partition"], p["stored_offset"], p["lag"]) for p in group["partitions"]] == \
                [(0, None, 5), (1, None, 0)]
            (consumer,) = got["iggy"]["consumers"]
            assert (consumer["id"], consumer["lag"], consumer["partitions"]) == (
                7, 2, [{"partition": 0, "stored_offset": 2, "next_offset": 5, "lag": 2}])
            (worker,) = got["jetstream"]["consumers"]
            assert (worker["stream"], worker["name"], worker["delivered"]["stream_seq"],
                    worker["ack_floor"]["stream_seq"], worker["ack_pending"], worker["num_pending"]) == \
                ("ORDERS", "worker", 3, 2, 1, 2)

            js = (await c.get("/console/api/jetstream", headers=root)).json()
            assert [s["name"] for s in js["streams"]] == ["KV_cfg", "ORDERS"]
            (bucket,) = js["kv"]
            assert bucket["values_shown"] and bucket["keys_count"] == 2
            big, gone = bucket["keys"]
            assert (big["key"], big["value"], big["value_size"], big["revision"]) == (
                "big", "v" * MAX_VALUE_PREVIEW, MAX_VALUE_PREVIEW + 10, 1)
            assert (gone["key"], gone["operation"], gone["history"], "value" in gone) == ("gone", "DEL", 2, False)

            # users: one limited to shop, one that may read JetStream's topics but not poll them
            ids = {s["name"]: s["id"] for s in (await c.get("/streams", headers=root)).json()}
            # (Iggy's rules: a stream's read_topics also allows polling; the global read_streams does not)
            for name, perms in (("shopper", {"streams": {str(ids["shop"]): {"read_topics": True}}}),
                                ("watcher", {"global": {"read_streams": True}})):
                r = await c.post("/users", headers=root, json={"username": name, "password": "secret-pass",
                                                               "status": "active", "permissions": perms})
                assert r.status_code in (200, 201), r.text
            shopper = await login("shopper", "secret-pass")
            got = (await c.get("/console/api/consumers", headers=shopper)).json()
            assert [g["name"] for g in got["iggy"]["groups"]] == ["billing"]
            assert got["jetstream"]["consumers"] == [] and got["pravega"]["groups"] == []
            assert (await c.get("/console/api/jetstream", headers=shopper)).json()["streams"] == []

            watcher = await login("watcher", "secret-pass")
            got = (await c.get("/console/api/consumers", headers=watcher)).json()
            assert [g["name"] for g in got["iggy"]["groups"]] == ["billing"]
            assert [w["name"] for w in got["jetstream"]["consumers"]] == ["worker"]
            (bucket,) = (await c.get("/console/api/jetstream", headers=watcher)).json()["kv"]
            assert not bucket["values_shown"] and [k["key"] for k in bucket["keys"]] == ["big", "gone"]
            assert all("value" not in k for k in bucket["keys"])
            assert (await c.get("/console/api/consumers")).status_code == 401
