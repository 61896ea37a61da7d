"""Writes the seed corpora of tests/fuzz/corpus/<target>/ from Ferry's own encoders:
``.venv/bin/python tests/fuzz/seeds.py`` (deterministic: the same files every run).

Each seed is a well-formed input in the layout its target reads (tests/fuzz/targets_*.py:
the choice bytes first, then the protocol bytes), so libFuzzer starts from inputs
that get past the first length check. Values for the table-driven codecs (Iggy,
Pravega, Kafka, the controller's protobuf) are drawn from the hypothesis strategies
the tables derive, derandomized. Files are named by content hash, so regenerating
changes nothing unless an encoder did.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
for path in (ROOT, HERE):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from hypothesis import HealthCheck, given, settings  # noqa: E402

MAX_SEED = 4096  # bytes per seed file: small seeds keep the corpus tree well under 2 MB


def draw(strategy, n: int = 2) -> list:
    """``n`` derandomized examples of ``strategy`` (the same ones every run)."""
    out: list = []

    @settings(max_examples=n, database=None, derandomize=True, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(value):
        out.append(value)

    collect()
    return out[:n]


def richest(strategy, encode, n: int = 8):
    """The example of ``strategy`` (of ``n`` derandomized ones) with the longest encoding:
    hypothesis starts from the minimal value, whose encoding is often empty."""
    return [max(draw(strategy, n), key=lambda v: len(encode(v)))]


def iggy() -> dict[str, list[bytes]]:
    from adapters.iggy.codec import legacy_request, vsr_request
    from adapters.iggy.spec import COMMANDS, LOGIN_USER
    commands = tuple(COMMANDS)
    seeds = []
    for i, cmd in enumerate(commands):
        for j, d in enumerate(sorted(cmd.dialects)):
            for value in richest(cmd.strategy(d), lambda v: cmd.encode(d, v)):
                seeds.append(bytes([i, j]) + cmd.encode(d, value))
    login = LOGIN_USER.encode(2, LOGIN_USER.cls(username="iggy", password="iggy", version="0.10.0", context=""))
    ping = legacy_request(1)
    frames = [
        legacy_request(38, login) + ping,
        legacy_request(38, LOGIN_USER.encode(1, LOGIN_USER.cls(username="u", password="p", version="", context="")))
        + legacy_request(202, b"\x00\x00\x00\x01\x03abc"),
        legacy_request(44, b"\x05token") + legacy_request(12),
        vsr_request(2, b"", code=1) + vsr_request(2, b"", code=10, request=1),
        vsr_request(1, login) + vsr_request(3, b""),
    ]
    return {"iggy_command": seeds, "iggy_frames": [b"\xff\xff\xff\xff" + f for f in frames]}


def nats() -> dict[str, list[bytes]]:
    connect = b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"no_responders":true,"user":"u","pass":"p"}\r\n'
    hdr = b"NATS/1.0\r\nA: 1\r\nB: two\r\n\r\n"
    streams = [
        connect + b"PING\r\nPUB a.b 5\r\nhello\r\nPUB a.b r.1 0\r\n\r\nSUB a.* q 1\r\nUNSUB 1 3\r\n",
        connect + b"HPUB a.b %d %d\r\n%sbody\r\nPONG\r\n" % (len(hdr), len(hdr) + 4, hdr),
        b"PUB x 1\r\na\r\nPUB x 1\r\nb\r\nPUB y 2\r\nab\r\nPUB x 1\r\nc\r\n",
        b"pub\ta.b  3\r\nabc\r\nsub a 1\r\nping\r\n+OK\r\n-ERR 'x'\r\n",
        connect + b"INFO {}\r\nPUB $SYS.x 1\r\na\r\nPUB a _R.1 1\r\nb\r\n",
    ]
    flags = (0x00, 0x10, 0x30, 0x50, 0x08)
    server = [bytes([f, 255, 255, 255]) + s for f in flags for s in streams]
    client = [b"\x07\xff\xff\xff" + s for s in (
        b'INFO {"server_id":"x","max_payload":1048576,"headers":true}\r\nPING\r\n+OK\r\n',
        b"MSG a.b 1 5\r\nhello\r\nMSG a.b 22 r.1 0\r\n\r\n",
        b"HMSG a.b 1 %d %d\r\n%sbody\r\n" % (len(hdr), len(hdr) + 4, hdr),
        b"HMSG _INBOX.x 1 28 28\r\nNATS/1.0 503 No Responders\r\n\r\n\r\nPONG\r\n-ERR 'Slow Consumer'\r\n",
    )]
    headers = [hdr, b"NATS/1.0\r\n\r\n", b"NATS/1.0 503\r\nNats-Subject: a.b\r\n\r\n",
               b"NATS/1.0 404 No Messages\r\n\r\n", b"NATS/1.0\r\nK:  v  \r\nK: w\r\n\r\n"]
    return {"nats_server": server, "nats_client": client, "nats_headers": headers}


def http() -> dict[str, list[bytes]]:
    send = json.dumps({"partitioning": {"kind": "messages_key", "value": base64.b64encode(b"k").decode()},
                       "messages": [{"id": 0, "payload": "aGVsbG8="},
                                    {"payload": "aGk=", "user_headers": [
                                        {"key": {"kind": "string", "value": "a2V5"},
                                         "value": {"kind": "uint32", "value": "AQAAAA=="}}]},
                                    {"id": 7, "payload": "eA==", "headers": {"k": {"kind": "string", "value": "dg=="}}}]})
    requests = [
        b"GET /streams HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer abc\r\n\r\n",
        b"POST /streams/1/topics/1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(send), send.encode()),
        b"POST /users/login HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5\r\n{\"a\":\r\n3\r\n 1}\r\n0\r\n\r\nGET / HTTP/1.0\r\n\r\n",
        b"PUT /x HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n{}",
        b"POST /users/login HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
        b"HTTP2-Settings: AAMAAABkAAQAAP__\r\nContent-Length: 2\r\n\r\n{}",
    ]
    h1 = [bytes([f, 255, 255, 255]) + r for f in (0x07, 0x85) for r in requests]
    topic = json.dumps({"name": "t", "partitions_count": 2, "compression_algorithm": "none", "message_expiry": 0,
                        "max_topic_size": 0, "replication_factor": 1, "topic_id": 3,
                        "options": {"segment.size": "1 GiB", "message.expiry": "7 days"}})
    perms = json.dumps({"global": {"manage_servers": True, "read_streams": True},
                        "streams": {"1": {"manage_stream": False, "read_topics": True,
                                          "topics": {"2": {"poll_messages": True}}}}})
    uh = json.dumps([{"key": {"kind": "string", "value": "aw=="}, "value": {"kind": "bool", "value": "AQ=="}}])
    js = [b"\x00" + send.encode(), b"\x01" + topic.encode(), b"\x02" + topic.encode(), b"\x03" + perms.encode(),
          b"\x04" + uh.encode(), b"\x04" + json.dumps("AQEAAABrAgEAAAB2").encode()]
    from adapters.http.tokens import TokenService
    import targets_http
    service = TokenService(targets_http._SECRET, clock=lambda: targets_http._NOW)
    token, _exp = service.issue(4, user_created_at=123)
    claims = {"jti": "0190-x", "iss": "iggy.rs", "aud": "iggy.rs", "sub": "5", "iat": targets_http._NOW,
              "nbf": targets_http._NOW, "exp": targets_http._NOW + 60, "ferry_uc": 9}
    jwt = [b"\x00" + token.encode(), b"\x02" + token.encode(), b"\x01" + json.dumps(claims).encode(),
           b"\x03" + json.dumps(claims).encode()]
    return {"http_h1": h1, "http_json": js, "http_jwt": jwt}


def jetstream() -> dict[str, list[bytes]]:
    stream = {"name": "ORDERS", "subjects": ["orders.*", "ship.>"], "retention": "limits", "max_msgs": 100,
              "max_age": 3_600_000_000_000, "duplicate_window": 60_000_000_000, "discard": "new",
              "storage": "file", "num_replicas": 1, "metadata": {"a": "b"}, "allow_direct": True}
    consumer = {"durable_name": "C", "deliver_policy": "all", "ack_policy": "explicit", "ack_wait": 30_000_000_000,
                "max_deliver": 5, "filter_subject": "orders.a", "backoff": [1_000_000_000], "max_ack_pending": 10}
    push = {"deliver_subject": "push.x", "idle_heartbeat": 5_000_000_000, "flow_control": True,
            "ack_policy": "none", "filter_subjects": ["orders.a", "orders.b"]}
    subjects = ["STREAM.CREATE.ORDERS", "CONSUMER.CREATE.ORDERS.C.orders.a", "CONSUMER.DURABLE.CREATE.ORDERS.C",
                "STREAM.MSG.GET.ORDERS", "INFO", "STREAM.NAMES", "CONSUMER.PAUSE.ORDERS.C"]
    bodies = [b'{"offset":3,"subject":"orders.*"}', b'{"seq":5,"last_by_subj":"orders.a"}',
              b'{"stream_name":"ORDERS","action":"create"}', b'{"pause_until":"2030-01-01T00:00:00Z"}']
    return {"jetstream_api": [b"\x00" + s.encode() for s in subjects]
            + [bytes([1, i]) + b for i, b in enumerate(bodies)]
            + [b"\x02" + json.dumps(stream).encode(),
               b"\x03" + json.dumps({"stream_name": "ORDERS", "config": consumer}).encode(),
               b"\x03" + json.dumps({"stream_name": "ORDERS", "config": push, "action": "create"}).encode() + b" ",
               b'\x04{"batch":10,"expires":5000000000,"idle_heartbeat":1000000000,"max_bytes":1024}', b"\x04 5",
               b'\x05{"delay":1000000000}', b"\x05 1s"]}


def pravega() -> dict[str, list[bytes]]:
    import h2.config
    import h2.connection
    from adapters.pravega import commands
    from adapters.pravega import controller_proto as proto
    from adapters.pravega.protobuf import strategy as pb_strategy
    import targets_pravega
    wire = []
    for cls in sorted(commands.CODE_OF, key=lambda c: commands.CODE_OF[c]):
        spec = commands.SPEC_OF[cls]
        if spec.block_only:
            continue
        for value in richest(commands.strategy(cls), commands.encode):
            frame = commands.encode(value)
            if len(frame) <= MAX_SEED:
                wire.append(b"\xff\xff\xff" + frame)
    writer = __import__("uuid").UUID(int=7)
    event = commands.Event(b"payload")
    block = commands.encode(event)
    append = (commands.encode(commands.SetupAppend(1, writer, "scope/stream/0.#epoch.0", ""))
              + commands.encode(commands.AppendBlock(writer, block + commands.encode(commands.PartialEvent(b"pa"))))
              + commands.encode(commands.AppendBlockEnd(writer, len(block), b"rt", 2, 5, 1)))
    wire.append(b"\xff\xff\xff" + append)
    protos = []
    for i, cls in enumerate(targets_pravega._MESSAGES):
        for value in richest(pb_strategy(cls), lambda v: v.encode()):
            protos.append(bytes([i]) + value.encode())
    grpc = []
    for method, (req, _resp) in sorted(proto.RPCS.items())[:8]:
        client = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        client.initiate_connection()
        sid = client.get_next_available_stream_id()
        client.send_headers(sid, [(":method", "POST"), (":scheme", "http"), (":path", f"/{proto.SERVICE}/{method}"),
                                  (":authority", "localhost"), ("content-type", "application/grpc"), ("te", "trailers")])
        body = richest(pb_strategy(req), lambda v: v.encode())[0].encode()
        client.send_data(sid, b"\x00" + len(body).to_bytes(4, "big") + body, end_stream=True)
        out = client.data_to_send()
        grpc.append(b"\xff\xff\xff" + out[len(targets_pravega._PREFACE):])
    return {"pravega_wire": wire, "pravega_protobuf": protos, "pravega_grpc": grpc}


def kafka() -> dict[str, list[bytes]]:
    from adapters.kafka.frames import encode_request
    from adapters.kafka.messages import API
    from adapters.kafka.records import Record, encode_batch
    requests = []
    for i, api in enumerate(API.apis):
        for j, version in enumerate(api.versions):
            if j % 3 and version != api.max:
                continue  # a third of the versions and the newest: the flexible switch is among them
            for value in richest(api.request.strategy(version), lambda v: api.request.encode(version, v)):
                frame = encode_request(api.key, version, 7, "fuzz", value)
                if len(frame) <= MAX_SEED:
                    requests.append(b"\x00\xff\xff\xff" + frame)
                    body = api.request.encode(version, value)
                    requests.append(bytes([1, i, j]) + body)
    records = [Record(0, 0, 0, None, b"v0", ()), Record(0, 5, 1, b"key", b"value", (("h", b"1"), ("n", None))),
               Record(0, 9, 2, b"k", None, ())]
    batches = [encode_batch(records, base_timestamp=1_700_000_000_000, compression=c) for c in range(5)]
    batches.append(encode_batch(records[:1], base_timestamp=1_700_000_000_000, producer_id=3, producer_epoch=0,
                                base_sequence=0, transactional=True))
    recs = [bytes([(4 << 2) | 0]) + b for b in batches] + [bytes([(8 << 2) | 1]) + batches[4]]
    recs += [b"\x02" + batches[0] + batches[2]]
    from adapters.kafka.compression import compress
    recs += [bytes([((c - 1) << 2) | 3]) + compress(c, b"abc" * 40) for c in range(1, 5)]
    return {"kafka_request": requests, "kafka_records": recs}


def core() -> dict[str, list[bytes]]:
    from core.message import Headers, HeaderValue
    from core.record import encode_record
    h = Headers()
    h.add("a", "b")
    h.add(HeaderValue.uint32(7), HeaderValue.raw(b"\x00\x01"))
    one = encode_record(5, 10, 1_700_000_000_000_000, 0, h.encode(), b"payload")
    two = one + encode_record(0, 11, 1_700_000_000_000_001, 3, b"", b"")
    legacy = Headers()
    legacy.add("k", "v")
    plain = encode_record(1, 0, 0, 0, legacy.encode_legacy(), b"x")
    return {"core_record": [b"\x00" + two, b"\x01" + two + b"\x00" * 10, b"\x00" + plain,
                            b"\x02" + one, b"\x05" + two]}  # 2, 5: stamp 1 and 2 records


def main() -> int:
    found: dict[str, list[bytes]] = {}
    for part in (iggy, nats, http, jetstream, pravega, kafka, core):
        found.update(part())
    for name, seeds in found.items():
        folder = HERE / "corpus" / name
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        for seed in seeds:
            if len(seed) <= MAX_SEED:
                (folder / f"seed-{hashlib.sha1(seed).hexdigest()[:16]}").write_bytes(seed)
        print(f"{name}: {len(list(folder.iterdir()))} seeds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
