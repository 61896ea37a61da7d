"""core.addressing: the default rule, bindings, invisible names, config errors."""

from __future__ import annotations

import tomllib

import pytest

from core.addressing import (
    KINDS_HEADER,
    PARTITION_KEY_HEADER,
    RESERVED_NATS_HEADERS,
    SUBJECT_HEADER,
    Addressing,
    Binding,
    is_nats_token,
    is_pravega_name,
    parse_bindings,
)
from core.errors import InvalidArgument
from core.subjects import SubjectTrie, is_valid_subject, subject_matches


def exists_in(*topics):
    known = set(topics)
    return lambda stream, topic: (stream, topic) in known


# -- default rule ----------------------------------------------------------------
def test_default_rule_every_protocol():
    a = Addressing()
    assert a.nats_subjects_for("orders", "eu") == ["orders.eu", "orders.eu.>"]
    assert a.live_subject_for("orders", "eu") == "orders.eu"
    assert a.pravega_names_for("orders", "eu") == ("orders", "eu")
    assert a.topic_for_pravega("orders", "eu") == ("orders", "eu")
    assert a.http_path_for("orders", "eu") == "/streams/orders/topics/eu"


@pytest.mark.parametrize(
    "subject, expected",
    [
        ("orders.eu", ("orders", "eu")),
        ("orders.eu.created", ("orders", "eu")),
        ("orders.eu.created.x.y", ("orders", "eu")),
        ("orders.eu.*", ("orders", "eu")),  # a literal "*" token published without pedantic
        ("orders", None),  # one token names no topic
        ("orders.us", None),  # no such topic: plain core NATS
        ("orders.*", None),
        ("orders..eu", None),
        ("", None),
        ("billing.eu", None),
    ],
)
def test_topic_for_subject_default(subject, expected):
    a = Addressing(exists=exists_in(("orders", "eu")))
    assert a.topic_for_subject(subject) == expected


def test_default_capture_agrees_with_the_capture_patterns():
    a = Addressing()
    patterns = a.nats_subjects_for("s", "t")
    for subject in ["s.t", "s.t.a", "s.t.a.b", "s.u", "s", "x.t"]:
        captured = a.topic_for_subject(subject, exists_in(("s", "t"))) == ("s", "t")
        assert captured == any(subject_matches(p, subject) for p in patterns), subject


def test_exists_callback_required():
    with pytest.raises(TypeError):
        Addressing().topic_for_subject("a.b")
    calls = []
    a = Addressing(exists=lambda s, t: calls.append((s, t)) or True)
    assert a.topic_for_subject("a.b.c") == ("a", "b")
    assert calls == [("a", "b")]
    # a per-call callback overrides the constructor's
    assert a.topic_for_subject("a.b", lambda s, t: False) is None


# -- invisible names -----------------------------------------------------------------
@pytest.mark.parametrize(
    "name, nats, pravega",
    [
        ("orders", True, True),
        ("Orders-2", True, True),
        ("a.b", False, True),  # dots: a Pravega name, never one NATS token
        ("a b", False, False),
        ("a\tb", False, False),
        ("*", False, False),
        (">", False, False),
        ("a*", False, False),
        ("a>b", False, False),
        ("", False, False),
        ("snake_case", True, False),
        ("ünï", True, False),
        ("a/b", True, False),
        ("x" * 255, True, True),
        ("x" * 256, True, False),
        ("bell\x07", False, False),
    ],
)
def test_name_visibility(name, nats, pravega):
    assert is_nats_token(name) is nats
    assert is_pravega_name(name) is pravega


@pytest.mark.parametrize("stream, topic", [("a.b", "c"), ("a", "b c"), ("*", "x"), ("a", ">"), ("", "t")])
def test_unbound_names_that_are_not_tokens_are_not_nats_visible(stream, topic):
    a = Addressing(exists=lambda s, t: True)
    assert a.live_subject_for(stream, topic) is None
    assert a.nats_subjects_for(stream, topic) == []


def test_dotted_stream_is_not_reachable_by_its_dotted_subject():
    # "a.b" + "c" would read as stream "a", topic "b": only a binding can map it.
    a = Addressing(exists=exists_in(("a.b", "c")))
    assert a.topic_for_subject("a.b.c") is None


def test_pravega_invisible_names():
    a = Addressing()
    assert a.pravega_names_for("snake_case", "t") is None
    assert a.pravega_names_for("s", "with space") is None
    assert a.topic_for_pravega("bad_scope", "t") is None
    assert a.pravega_names_for("a.b", "c-d") == ("a.b", "c-d")


def test_http_path_percent_encodes():
    assert Addressing.http_path_for("a b", "c/d") == "/streams/a%20b/topics/c%2Fd"
    assert Addressing.http_path_for(0, 3) == "/streams/0/topics/3"


# -- bindings override ---------------------------------------------------------------
def test_binding_gives_names_to_an_invisible_topic():
    b = Binding("billing", "invoices v2", nats_subject="billing.invoices", pravega_stream="invoices-v2")
    a = Addressing([b], exists=exists_in(("billing", "invoices v2")))
    assert a.nats_subjects_for("billing", "invoices v2") == ["billing.invoices", "billing.invoices.>"]
    assert a.live_subject_for("billing", "invoices v2") == "billing.invoices"
    assert a.topic_for_subject("billing.invoices") == ("billing", "invoices v2")
    assert a.topic_for_subject("billing.invoices.paid") == ("billing", "invoices v2")
    assert a.pravega_names_for("billing", "invoices v2") == ("billing", "invoices-v2")
    assert a.topic_for_pravega("billing", "invoices-v2") == ("billing", "invoices v2")
    assert a.binding_for("billing", "invoices v2") is b


def test_binding_replaces_the_default_subject():
    b = Binding("orders", "eu", nats_subject="shop.eu")
    a = Addressing([b], exists=exists_in(("orders", "eu")))
    assert a.topic_for_subject("shop.eu.x") == ("orders", "eu")
    assert a.topic_for_subject("orders.eu") is None  # default subject no longer captures
    assert a.nats_subjects_for("orders", "eu") == ["shop.eu", "shop.eu.>"]


def test_binding_claims_a_default_subject_of_another_topic():
    b = Binding("archive", "all-orders", nats_subject="orders")
    a = Addressing([b], exists=exists_in(("archive", "all-orders"), ("orders", "eu")))
    assert a.topic_for_subject("orders.eu") == ("archive", "all-orders")
    assert a.live_subject_for("orders", "eu") is None  # shadowed: every orders.> subject is claimed
    assert a.nats_subjects_for("orders", "eu") == []


def test_most_specific_binding_wins():
    bindings = [
        Binding("s", "broad", nats_subject="orders"),
        Binding("s", "narrow", nats_subject="orders.eu.special"),
    ]
    a = Addressing(bindings, exists=lambda s, t: True)
    assert a.topic_for_subject("orders.eu") == ("s", "broad")
    assert a.topic_for_subject("orders.eu.special") == ("s", "narrow")
    assert a.topic_for_subject("orders.eu.special.x") == ("s", "narrow")
    assert a.topic_for_subject("orders.eu.specialx") == ("s", "broad")


def test_longer_binding_carves_a_subtree_out_of_a_default_topic():
    a = Addressing([Binding("x", "y", nats_subject="orders.eu.vip")], exists=lambda s, t: True)
    assert a.live_subject_for("orders", "eu") == "orders.eu"
    assert a.topic_for_subject("orders.eu.other") == ("orders", "eu")
    assert a.topic_for_subject("orders.eu.vip.1") == ("x", "y")


def test_bound_subject_of_a_missing_topic_is_plain_nats():
    a = Addressing([Binding("x", "y", nats_subject="a.b")], exists=exists_in(("a", "b")))
    assert a.topic_for_subject("a.b") is None  # the binding owns the subject; its topic is absent


def test_binding_without_nats_subject_keeps_the_default():
    a = Addressing([Binding("orders", "eu", pravega_scope="shop")], exists=exists_in(("orders", "eu")))
    assert a.topic_for_subject("orders.eu") == ("orders", "eu")
    assert a.pravega_names_for("orders", "eu") == ("shop", "eu")
    assert a.topic_for_pravega("orders", "eu") is None  # the topic answers to its bound names only
    assert a.topic_for_pravega("shop", "eu") == ("orders", "eu")


def test_pravega_binding_shadows_the_default_pair_of_another_topic():
    a = Addressing([Binding("x", "y", pravega_scope="orders", pravega_stream="eu")])
    assert a.topic_for_pravega("orders", "eu") == ("x", "y")
    assert a.pravega_names_for("orders", "eu") is None


def test_delivery_subject():
    a = Addressing([Binding("s", "narrow", nats_subject="orders.eu.vip")])
    assert a.delivery_subject("orders", "eu", "orders.eu.created") == "orders.eu.created"
    assert a.delivery_subject("orders", "eu", None) == "orders.eu"
    assert a.delivery_subject("orders", "eu", "other.topic") == "orders.eu"  # not this topic's subject
    assert a.delivery_subject("orders", "eu", "orders.eu.*") == "orders.eu"  # not literal
    assert a.delivery_subject("orders", "eu", "orders.eu.vip.1") == "orders.eu"  # claimed by the binding
    assert a.delivery_subject("s", "narrow", "orders.eu.vip.1") == "orders.eu.vip.1"
    assert a.delivery_subject("a b", "c", "a.c") is None


def test_live_subject_feeds_a_trie_subscription():
    # Messages from other protocols are delivered on live_subject_for(): a NATS
    # subscriber of either capture pattern receives them.
    a = Addressing()
    trie = SubjectTrie()
    for i, p in enumerate(a.nats_subjects_for("orders", "eu")):
        trie.insert(p, i)
    trie.insert("orders.*", "wild")
    assert set(trie.match(a.live_subject_for("orders", "eu")).plain) == {0, "wild"}


# -- config parsing ---------------------------------------------------------------------
CONFIG = """
[[binding]]
stream = "billing"
topic = "invoices v2"
nats_subject = "billing.invoices"
pravega_stream = "invoices-v2"
create = true
partitions = 4

[[binding]]
stream = "orders"
topic = "eu"
"""


def test_parse_bindings_from_toml():
    bindings = parse_bindings(tomllib.loads(CONFIG)["binding"])
    assert bindings == (
        Binding("billing", "invoices v2", "billing.invoices", None, "invoices-v2", 4, True),
        Binding("orders", "eu"),
    )
    assert Addressing(bindings).bindings_to_create() == [bindings[0]]
    assert parse_bindings(None) == ()
    assert parse_bindings([]) == ()


@pytest.mark.parametrize(
    "table, where",
    [
        ({"topic": "t"}, "binding[0].stream: required"),
        ({"stream": "s"}, "binding[0].topic: required"),
        ({"stream": 3, "topic": "t"}, "binding[0].stream: must be a string"),
        ({"stream": "", "topic": "t"}, "binding[0].stream: must be 1..255 bytes"),
        ({"stream": "s", "topic": "é" * 128}, "binding[0].topic: must be 1..255 bytes"),
        ({"stream": "s", "topic": "t", "nats": "a"}, "binding[0].nats: unknown key"),
        ({"stream": "s", "topic": "t", "nats_subject": "a.*"}, "binding[0].nats_subject:"),
        ({"stream": "s", "topic": "t", "nats_subject": "a..b"}, "binding[0].nats_subject:"),
        ({"stream": "s", "topic": "t", "nats_subject": "a b"}, "binding[0].nats_subject:"),
        ({"stream": "s", "topic": "t", "nats_subject": 5}, "binding[0].nats_subject: must be a string"),
        ({"stream": "s", "topic": "t", "pravega_scope": "bad_scope"}, "binding[0].pravega_scope:"),
        ({"stream": "s", "topic": "t", "pravega_stream": "a b"}, "binding[0].pravega_stream:"),
        ({"stream": "my stream", "topic": "t", "pravega_stream": "ok"}, "binding[0].pravega_scope: required"),
        ({"stream": "s", "topic": "t t", "pravega_scope": "ok"}, "binding[0].pravega_stream: required"),
        ({"stream": "s", "topic": "t", "partitions": 4}, "binding[0].partitions: only applies with create"),
        ({"stream": "s", "topic": "t", "create": True, "partitions": 0}, "binding[0].partitions: must be between"),
        ({"stream": "s", "topic": "t", "create": True, "partitions": 1001}, "binding[0].partitions:"),
        ({"stream": "s", "topic": "t", "create": True, "partitions": "4"}, "binding[0].partitions: must be an integer"),
        ({"stream": "s", "topic": "t", "create": True, "partitions": True}, "binding[0].partitions:"),
        ({"stream": "s", "topic": "t", "create": "yes"}, "binding[0].create: must be true or false"),
    ],
)
def test_config_errors_name_the_field(table, where):
    with pytest.raises(InvalidArgument) as info:
        parse_bindings([table])
    assert str(info.value).startswith(where), str(info.value)
    assert info.value.details["field"] == where.split(".")[1].split(":")[0]


@pytest.mark.parametrize(
    "tables, where",
    [
        ([{"stream": "s", "topic": "t"}, {"stream": "s", "topic": "t"}], "binding[1].stream:"),
        (
            [{"stream": "s", "topic": "a", "nats_subject": "x.y"}, {"stream": "s", "topic": "b", "nats_subject": "x.y"}],
            "binding[1].nats_subject:",
        ),
        (
            [{"stream": "a", "topic": "b", "pravega_scope": "p"}, {"stream": "c", "topic": "b", "pravega_scope": "p"}],
            "binding[1].pravega_scope:",
        ),
    ],
)
def test_duplicate_bindings_are_refused(tables, where):
    with pytest.raises(InvalidArgument) as info:
        parse_bindings(tables)
    assert str(info.value).startswith(where)
    assert "binding[0]" in str(info.value)


def test_bad_shapes():
    with pytest.raises(InvalidArgument, match=r"^binding: must be an array"):
        parse_bindings({"stream": "s"})
    with pytest.raises(InvalidArgument, match=r"^binding\[1\]: must be a table"):
        parse_bindings([{"stream": "s", "topic": "t"}, "nope"])


def test_direct_construction_validates_too():
    with pytest.raises(InvalidArgument, match=r"^binding\.nats_subject:"):
        Binding("s", "t", nats_subject=">")
    with pytest.raises(InvalidArgument, match=r"^binding\[1\]\.stream:"):
        Addressing([Binding("s", "t"), Binding("s", "t")])


# -- reserved headers ---------------------------------------------------------------------
def test_reserved_header_names():
    assert SUBJECT_HEADER == "ferry-nats-subject"
    assert len({SUBJECT_HEADER.lower(), KINDS_HEADER.lower(), PARTITION_KEY_HEADER.lower()}) == 3
    assert not SUBJECT_HEADER.lower().startswith("nats-")  # never collides with nats-server's own headers
    assert RESERVED_NATS_HEADERS == {SUBJECT_HEADER.lower(), KINDS_HEADER.lower()}
    # NATS header names are RFC 7230 tokens: these must be sendable by any NATS client
    for name in (SUBJECT_HEADER, KINDS_HEADER, PARTITION_KEY_HEADER):
        assert all(c.isalnum() or c == "-" for c in name)
        assert is_valid_subject(name)  # no whitespace either


# -- Kafka names --------------------------------------------------------------------------
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from core.addressing import is_kafka_name, kafka_name_for, topic_for_kafka  # noqa: E402

_KAFKA_TEXT = st.text(alphabet="ab._-Z9 /", min_size=0, max_size=12)


@pytest.mark.parametrize("name, pair", [
    ("orders", ("kafka", "orders")), ("orders.eu", ("orders", "eu")), ("a.b.c", ("a", "b.c")),
    (".x", ("kafka", ".x")), ("x.", ("kafka", "x.")), ("kafka.a.b", ("kafka", "a.b")),
    ("..", None), (".", None), ("", None), ("has space", None), ("x" * 250, None),
])
def test_kafka_names_to_topics(name, pair):
    assert topic_for_kafka(name) == pair


@pytest.mark.parametrize("pair, name", [
    (("kafka", "orders"), "orders"), (("kafka", "a.b"), "kafka.a.b"), (("orders", "eu"), "orders.eu"),
    (("a.b", "c"), None), (("s", "t t"), None), (("s", ""), None), (("other", "x"), "other.x"),
])
def test_topics_to_kafka_names(pair, name):
    assert kafka_name_for(*pair) == name


@settings(max_examples=200)
@given(_KAFKA_TEXT, _KAFKA_TEXT)
def test_kafka_name_reads_back_to_its_topic(stream, topic):
    name = kafka_name_for(stream, topic)
    if name is not None:
        assert is_kafka_name(name) and topic_for_kafka(name) == (stream, topic)


def test_another_default_stream():
    assert topic_for_kafka("x", "events") == ("events", "x")
    assert kafka_name_for("events", "x", "events") == "x"
    assert kafka_name_for("kafka", "x", "events") == "kafka.x"
