"""Topic options (adapters/iggy/options.py, docs/iggy.md "Topic options"): the
catalog served by DescribeOptions and ``GET /options/{scope}``, create with
explicit options, GetTopic's explicit and derived blocks, create-time keys refused
on update, the max_topic_size floor, the reference server's value checks, and
segment_size / enforce_fsync taking effect in the core.

Reference: apache/iggy at the commit iggy-current.md 1 names (server
responses.rs ``topic_option_descriptors``, dispatch.rs admission bounds, common
types/options/mod.rs). Error texts are the 0.9.0 client's Display forms."""

from __future__ import annotations

import struct

import httpx
import pytest
from iggy_clients import run_scenario
from iggy_pair import Client

from adapters.iggy import options
from adapters.iggy import replies as R
from adapters.iggy.errors import IggyError, IggyStatus
from core.broker import Broker, BrokerConfig
from core.log import LogConfig
from core.message import Headers, HeaderValue
from ferry_harness import running_gateway

E = IggyError
MiB = 1 << 20
NEVER = (1 << 64) - 1
FLOOR = ("Max topic size cannot be lower than segment size. Max topic size: server_default < "
         "segment size: 0 B.")  # 1019 as the 0.9.0 client shows it (fields defaulted)
UNSUPPORTED = "Unsupported option key: "  # 4041
INVALID = "Invalid option value for key: "  # 4042


def steps(lines):
    return {line["step"]: {k: v for k, v in line.items() if k != "step"} for line in lines}


def u64(n):
    return f"HeaderValue.UnsignedInt64({n})"


def u32(n):
    return f"HeaderValue.UnsignedInt32({n})"


def flag(b):
    return f"HeaderValue.Bool({str(b).lower()})"


def text(s):
    return f'HeaderValue.String("{s}")'


# -- the real client ------------------------------------------------------------------------
def test_topic_options_with_the_real_0_9_0_client(tmp_path):
    """The gateway runs with log.fsync = never and the default 256 MiB segments, so a
    topic without options derives enforce_fsync false and segment_size 256 MiB."""
    with running_gateway(tmp_path, FERRY_LOG_FSYNC="never") as gw:
        got = steps(run_scenario("apache-iggy==0.9.0", "current_topic_options.py", gw.ports["iggy_tcp"],
                                 str(gw.ports["http"])))
        with httpx.Client(base_url=f"http://127.0.0.1:{gw.ports['http']}", timeout=20) as http:
            token = http.post("/users/login", json={"username": "iggy", "password": "iggy"}).json()
            http.headers["authorization"] = f"Bearer {token['access_token']['token']}"
            over_http = http.get("/options/topic").json()

    defaults = {"compression_algorithm": text("none"), "message_expiry": u64(NEVER), "max_topic_size": u64(NEVER),
                "segment_size": u64(256 * MiB), "enforce_fsync": flag(False),
                "messages_required_to_save": u32(1024), "size_of_messages_required_to_save": u64(MiB),
                "preallocate_segments": flag(False)}
    kinds = {"compression_algorithm": "string", "enforce_fsync": "bool", "preallocate_segments": "bool",
             "messages_required_to_save": "uint32"}
    assert got["catalog"] == {"options": [[k, kinds.get(k, "uint64"), v] for k, v in defaults.items()],
                              "described": True}  # the reference's keys, in its order
    assert got["catalog_scopes"] == {"stream": 0, "user": 0}
    # The HTTP form is the same catalog (serde of OptionSpec: kind by name, default as bytes).
    assert [(s["key"], s["kind"]) for s in over_http] == [(k, kinds.get(k, "uint64")) for k in defaults]
    assert over_http[3]["default_value"] == list((256 * MiB).to_bytes(8, "little"))
    assert over_http[4]["default_value"] == [0] and all(s["description"] for s in over_http)

    explicit = {"compression_algorithm": text("gzip"), "enforce_fsync": flag(True), "max_topic_size": u64(64 * MiB),
                "message_expiry": u64(3_600_000_000), "messages_required_to_save": u32(500),
                "segment_size": u64(MiB)}
    assert got["explicit"] == {"options": explicit, "compression": "gzip", "partitions": 2,
                               "derived": {k: defaults[k] for k in defaults if k not in explicit}}
    assert got["all_derived"] == {"options": {}, "derived": defaults}
    assert got["listed"] == {"topics": {"opts": sorted(explicit), "plain": []}}  # GetTopics carries the blocks too
    assert got["strings"] == {"options": {  # re-encoded in each key's canonical kind, as the reference's create
        "segment_size": u64(2 * MiB), "message_expiry": u64(7 * 86_400 * 10**6), "max_topic_size": u64(1 << 30),
        "enforce_fsync": flag(False), "size_of_messages_required_to_save": u64(4096),
        "preallocate_segments": flag(True), "compression_algorithm": text("gzip")}}

    for key in ("segment_size", "enforce_fsync", "preallocate_segments", "messages_required_to_save", "bogus_key"):
        assert got[f"update_{key}"] == {"error": UNSUPPORTED}, key  # create-time keys: 4041, as unknown ones
    assert got["update_below_floor"] == {"error": FLOOR}
    assert got["updated"] == {"options": {"max_topic_size": u64(512 * MiB)},  # an update makes its keys explicit
                              "derived": sorted(k for k in defaults if k != "max_topic_size")}
    assert got["updated_text"] == {"expiry": u64(2 * 3600 * 10**6), "kept": sorted(explicit)}

    assert {k[4:]: v["error"] for k, v in got.items() if k.startswith("max_")} == {
        "issue_4563": FLOOR,  # the case: below the 256 MiB segments
        "4563_small_segments": FLOOR, "equal": None, "one_below": FLOOR, "above_default": None,
        "below_default": FLOOR, "unlimited": None, "text": FLOOR}
    assert {k[4:]: v["error"] for k, v in got.items() if k.startswith("bad_")} == {
        "segment_below_min": INVALID, "segment_above_max": INVALID, "segment_not_512": INVALID,
        "segment_text": INVALID, "fsync_text": INVALID, "messages_zero": INVALID, "size_of_too_big": INVALID,
        "compression_zip": INVALID, "preallocate_too_much": INVALID, "unknown_key": UNSUPPORTED}
    assert got["refused_nothing_created"] == {
        "topics": ["m-above_default", "m-equal", "m-unlimited", "opts", "plain", "text"]}

    # In effect: 1 MiB segments roll (each 600 KB send is a batch, two do not fit), 256 MiB
    # ones do not; only the enforce_fsync topic is fdatasynced (the broker's policy is never).
    assert got["effect"] == {"segments": {"opts": [4, 1], "plain": [1]}, "fsyncs_plain": 0, "fsyncs_opts": 4}

    broker = Broker.open(tmp_path / "data")  # the core, after a restart
    try:
        settings = {name: (t.segment_bytes, t.fsync) for name in ("opts", "plain", "text")
                    for t in [broker.get_topic("s", name)]}
        assert settings == {"opts": (MiB, "always"), "plain": (0, ""), "text": (2 * MiB, "never")}
        part = broker.partition("s", "opts", 0)
        assert part.cfg.segment_bytes == MiB and part.cfg.fsync == "always"
        sizes = sorted(p.stat().st_size for p in part.path.glob("*.log"))
        assert len(sizes) == 4 and max(sizes) <= MiB
        body = Client(broker, 3)
        assert body.login() == 0
        record, _ = R.TOPIC.decode(3, body.ok("topic.get", stream_id="s", topic_id="opts"), exact=False)
        assert sorted(k.as_str() for k, _v in Headers.decode(record.options)) == sorted(explicit)  # kept
    finally:
        broker.close()


def test_the_http_catalog_route(tmp_path):
    with running_gateway(tmp_path) as gw, httpx.Client(base_url=f"http://127.0.0.1:{gw.ports['http']}",
                                                        timeout=20) as http:
        assert http.get("/options/topic").status_code == 401  # a logged-in user's
        token = http.post("/users/login", json={"username": "iggy", "password": "iggy"}).json()
        http.headers["authorization"] = f"Bearer {token['access_token']['token']}"
        r = http.get("/options/topic")
        assert r.status_code == 200
        assert r.json()[4] == {"key": "enforce_fsync", "kind": "bool", "default_value": [1],  # batch fsyncs
                               "description": options.BY_KEY["enforce_fsync"].description}
        assert http.get("/options/stream").json() == http.get("/options/user").json() == []
        bad = http.get("/options/topics")
        assert bad.status_code == 400 and (bad.json()["id"], bad.json()["code"]) == (3, "invalid_command")
        paths = http.get("/openapi.json").json()["paths"]
        assert paths["/options/{scope}"]["get"]["x-iggy-command"] == "system.describe_options"


# -- the session, without a client ---------------------------------------------------------
@pytest.fixture
def broker(tmp_path):
    b = Broker.open(tmp_path / "data", BrokerConfig(log=LogConfig(segment_bytes=4 * MiB)))
    yield b
    b.close()


def _client(broker, dialect=3):
    c = Client(broker, dialect)
    assert c.login() == 0
    if not broker.list_streams():
        c.ok("stream.create", name="s")
    return c


def _create(c, name, block, partitions=1):
    return c.call("topic.create", stream_id="s", partitions_count=partitions, name=name, options=block)[0]


def _tlv(*fields):
    return b"".join(struct.pack("<BI", kind, len(data)) + data for kind, data in fields)


@pytest.mark.parametrize("block", [
    b"\x02", _tlv((2, b"segment_size")),  # truncated; a key without its value
    _tlv((0, b"k"), (2, b"v")), _tlv((12, b"segment_size"), (2, b"v")),  # kind 0; a key that is not a string
    _tlv((2, b"\xff"), (2, b"v")),  # a key that is not UTF-8
    _tlv((2, b"enforce_fsync"), (3, b"\x01"), (2, b"enforce_fsync"), (3, b"\x00")),  # a duplicate key
    _tlv((2, b"k"), (2, b"")), _tlv((2, b"k" * 256), (2, b"v")),  # fields are 1..255 bytes
])
def test_a_malformed_block_is_invalid_command(broker, block):
    c = _client(broker)
    assert _create(c, "t", block) == E.INVALID_COMMAND
    assert broker.list_topics("s") == []


@pytest.mark.parametrize("key,kind,data,status", [
    ("enforce_fsync", 3, b"\x02", 4042), ("enforce_fsync", 3, b"\x01\x00", 4042),  # bool is one byte 0 or 1
    ("enforce_fsync", 2, b"True", 4042), ("enforce_fsync", 99, b"\x01", 4042),  # an unknown kind: the value's
    ("bogus", 99, b"\x01", 4041), ("segment_size", 11, (MiB).to_bytes(4, "little"), 4042),  # u64 only
    ("messages_required_to_save", 11, (16 * MiB + 1).to_bytes(4, "little"), 4042),
    ("compression_algorithm", 9, b"\x03", 4042), ("message_expiry", 2, b"7 fortnights", 4042),
    ("message_expiry", 2, b"5000000000s", 4042),  # past u32::MAX seconds
    ("durability", 2, b"eventually", 4042), ("durability", 12, b"\x01" * 8, 4042),
    ("max_topic_size", 2, b"-1", 4042),
])
def test_values_the_catalog_refuses(broker, key, kind, data, status):
    c = _client(broker)
    assert _create(c, "t", _tlv((2, key.encode()), (kind, data))) == status


def test_first_error_in_wire_order_then_cross_key_checks(broker):
    c = _client(broker)
    unknown_first = _tlv((2, b"aaa"), (2, b"1"), (2, b"enforce_fsync"), (2, b"maybe"))
    assert _create(c, "t", unknown_first) == E.UNSUPPORTED_OPTION_KEY
    bad_first = _tlv((2, b"enforce_fsync"), (2, b"maybe"), (2, b"zzz"), (2, b"1"))
    assert _create(c, "t", bad_first) == E.INVALID_OPTION_VALUE
    # preallocation bound, then the partition count, then the floor (dispatch.rs order)
    both = Headers([("max_topic_size", HeaderValue.uint64(1)), ("preallocate_segments", True),
                    ("segment_size", HeaderValue.uint64(1 << 30))]).encode()
    assert _create(c, "t", both, partitions=65) == E.INVALID_OPTION_VALUE
    floor = Headers([("max_topic_size", HeaderValue.uint64(1))]).encode()
    assert _create(c, "t", floor, partitions=1001) == E.TOO_MANY_PARTITIONS
    assert _create(c, "t", floor) == E.INVALID_TOPIC_SIZE
    # the floor is the broker's segment size (4 MiB here) when the topic sets none
    assert _create(c, "t", Headers([("max_topic_size", HeaderValue.uint64(4 * MiB - 1))]).encode()) == 1019
    assert _create(c, "t", Headers([("max_topic_size", HeaderValue.uint64(4 * MiB))]).encode()) == 0


def test_sentinels_resolve_as_absent_and_durability_keys_are_accepted(broker):
    c = _client(broker)
    block = Headers([("consumer_offset_durability", "persisted"), ("durability", "replicated"),
                     ("max_topic_size", HeaderValue.uint64(0)), ("message_expiry", "server_default"),
                     ("segment_size", HeaderValue.uint64(0)), ("size_of_messages_required_to_save", "0")]).encode()
    assert _create(c, "t", block) == 0
    info = broker.get_topic("s", "t")
    assert (info.max_topic_size, info.message_expiry, info.segment_bytes, info.fsync) == (0, 0, 0, "")
    explicit, derived = options.option_blocks(broker, info)
    assert explicit == b"" and len(Headers.decode(derived)) == len(options.TOPIC_OPTIONS)


@pytest.mark.parametrize("dialect", [1, 2, 4, 5])
def test_older_dialects_get_the_same_size_floor(broker, dialect):
    """iggy.md 3.6 / 9: a max_topic_size below the segment size is 1019 InvalidTopicSize
    in the seed-era server too; 0 (server default) and u64::MAX (unlimited) pass."""
    c = _client(broker, dialect)
    for name, size, status in (("small", 4563, E.INVALID_TOPIC_SIZE), ("zero", 0, 0), ("unlimited", NEVER, 0)):
        got = c.call("topic.create", stream_id="s", partitions_count=1, name=name, max_topic_size=size)[0]
        assert got == status, name
    status, _ = c.call("topic.update", stream_id="s", topic_id="zero", name="zero", max_topic_size=MiB)
    assert status == E.INVALID_TOPIC_SIZE
    assert broker.get_topic("s", "zero").max_topic_size == 0


def test_an_update_patches_and_its_sentinel_resets_to_the_default(broker):
    c = _client(broker)
    block = Headers([("max_topic_size", HeaderValue.uint64(8 * MiB)), ("message_expiry", "1h"),
                     ("segment_size", HeaderValue.uint64(2 * MiB))]).encode()
    assert _create(c, "t", block) == 0
    update = Headers([("message_expiry", HeaderValue.uint64(0))]).encode()  # 0: back to the default
    c.ok("topic.update", stream_id="s", topic_id="t", name="t", options=update)
    info = broker.get_topic("s", "t")
    assert (info.message_expiry, info.max_topic_size, info.segment_bytes) == (0, 8 * MiB, 2 * MiB)
    explicit, _ = options.option_blocks(broker, info)
    assert sorted(k.as_str() for k, _v in Headers.decode(explicit)) == ["max_topic_size", "segment_size"]
    # the floor on update is the topic's own segment size
    low = Headers([("max_topic_size", HeaderValue.uint64(2 * MiB - 512))]).encode()
    assert c.call("topic.update", stream_id="s", topic_id="t", name="t", options=low)[0] == E.INVALID_TOPIC_SIZE
    ok = Headers([("max_topic_size", HeaderValue.uint64(2 * MiB))]).encode()
    c.ok("topic.update", stream_id="s", topic_id="t", name="t", options=ok)
    assert broker.get_topic("s", "t").max_topic_size == 2 * MiB


def test_describe_options_scopes(broker):
    c = _client(broker)
    assert c.call("system.describe_options", scope=0)[0] == E.INVALID_COMMAND
    body = c.ok("system.describe_options", scope=1)
    assert struct.unpack_from("<I", body)[0] == len(options.TOPIC_OPTIONS) == 8
    with pytest.raises(IggyStatus):
        options.describe(broker, 4)


@pytest.mark.parametrize("given,want", [
    ("1048576", MiB), ("128MiB", 128 * MiB), ("128 MiB", 128 * MiB), ("1 GiB", 1 << 30), ("2GB", 2 * 10**9),
    ("4kib", 4096), ("1.5 KB", 1500), ("0", 0), ("none", 0), ("Unlimited", 0),
])
def test_byte_size_text(given, want):
    assert options.parse_byte_size(given) == want


@pytest.mark.parametrize("given,want_us", [
    ("7 days", 7 * 86_400 * 10**6), ("1h 30m", 5_400 * 10**6), ("1h30m", 5_400 * 10**6), ("5s", 5 * 10**6),
    ("100ms", 100_000), ("2 weeks", 14 * 86_400 * 10**6), ("1M", 2_630_016 * 10**6),
    ("none", NEVER), ("never_expire", NEVER), ("server_default", 0),
])
def test_expiry_text(given, want_us):
    assert options._expiry_text(given) == want_us
