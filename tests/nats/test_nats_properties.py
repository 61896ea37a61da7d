"""Properties: how a byte stream is split never changes what the parser and the
connection make of it (STYLE.md section 6.4)."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.nats.events import Connect, HPub, Info, Ok, Ping, Pong, Pub, Sub, Unsub
from adapters.nats.headers import HeaderBlock, encode_headers

from natsproto_helpers import chunks_at, new_conn, outcome, run_conn

TOKEN = st.text("abcXYZ019_-$*>", min_size=1, max_size=5)
SUBJECT = st.lists(TOKEN, min_size=1, max_size=4).map(".".join)
BLANKS = st.text(" \t", min_size=1, max_size=3)
EOL = st.sampled_from(["\r\n", "\n"])
SID = st.text("0123456789abc", min_size=1, max_size=4)


def spell(draw, verb: str) -> str:
    """The verb in random letter case (nats-server matches it case-insensitively)."""
    flips = draw(st.lists(st.booleans(), min_size=len(verb), max_size=len(verb)))
    return "".join(c.lower() if f else c for c, f in zip(verb, flips))


@st.composite
def pub_op(draw):
    subject, payload = draw(SUBJECT), draw(st.binary(max_size=40))
    reply = draw(st.one_of(st.just(""), SUBJECT))
    b = lambda: draw(BLANKS)  # noqa: E731
    args = b() + subject + (b() + reply if reply else "") + b() + str(len(payload))
    line = (spell(draw, "PUB") + args + draw(EOL)).encode()
    return line + payload + b"\r\n", Pub(subject, reply, payload)


@st.composite
def hpub_op(draw):
    subject, payload = draw(SUBJECT), draw(st.binary(max_size=20))
    items = draw(st.lists(st.tuples(st.sampled_from(["A", "a", "Nats-Msg-Id"]), st.text("xyz 12", max_size=5)
                                    .map(str.strip)), max_size=3))
    header = encode_headers(HeaderBlock(tuple(items), draw(st.sampled_from(["", "503"]))))
    reply = draw(st.one_of(st.just(""), SUBJECT))
    sizes = f"{len(header)} {len(header) + len(payload)}"
    line = f"{spell(draw, 'HPUB')} {subject}{' ' + reply if reply else ''} {sizes}\r\n".encode()
    return line + header + payload + b"\r\n", HPub(subject, reply, header, payload)


@st.composite
def sub_op(draw):
    subject, queue, sid = draw(SUBJECT), draw(st.one_of(st.just(""), TOKEN)), draw(SID)
    b = lambda: draw(BLANKS)  # noqa: E731
    line = spell(draw, "SUB") + b() + subject + (b() + queue if queue else "") + b() + sid
    return (line + draw(st.sampled_from(["", " "])) + draw(EOL)).encode(), Sub(subject, queue, sid.encode())


@st.composite
def unsub_op(draw):
    sid, max_msgs = draw(SID), draw(st.integers(0, 99))
    line = spell(draw, "UNSUB") + draw(BLANKS) + sid + (draw(BLANKS) + str(max_msgs) if max_msgs else "")
    return (line + draw(EOL)).encode(), Unsub(sid.encode(), max_msgs)


@st.composite
def simple_op(draw):
    verb, event = draw(st.sampled_from([("PING", Ping()), ("PONG", Pong()), ("+OK", Ok())]))
    junk = draw(st.sampled_from(["", " ", " whatever", "\tx"]))
    return (spell(draw, verb) + junk + draw(EOL)).encode(), event


@st.composite
def connect_op(draw):
    flags = st.sampled_from(["verbose", "pedantic", "echo"])
    fields = draw(st.dictionaries(flags, st.booleans(), max_size=3))
    name = draw(st.text("abc ", max_size=4))
    doc = dict(fields, name=name)
    line = spell(draw, "CONNECT") + draw(st.sampled_from(["", " ", "\t "])) + json.dumps(doc)
    return (line + draw(EOL)).encode(), Connect(**doc, fields=frozenset(doc))


@st.composite
def info_op(draw):
    return (spell(draw, "INFO") + ' {"x": 1}' + draw(EOL)).encode(), Info({"x": 1})


OPS = st.one_of(pub_op(), hpub_op(), sub_op(), unsub_op(), simple_op(), connect_op(), info_op())
CUTS = st.lists(st.integers(min_value=1, max_value=4000), max_size=12)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(OPS, min_size=1, max_size=12), CUTS)
def test_valid_streams_any_split_same_events(ops, cuts):
    stream = b"".join(data for data, _ in ops)
    expected = [event for _, event in ops]
    assert outcome([stream]) == (expected, None, False)
    assert outcome(chunks_at(stream, cuts)) == (expected, None, False)


# Noise: valid operations mixed with fragments that break them in the ways
# clients do (bad verbs, blanks, stray CR/LF, wrong sizes, long lines).
JUNK = st.one_of(
    st.binary(max_size=6),
    st.text("PUBSINGOKCERHMX+- \t\r\n0123456789.*>", max_size=12).map(str.encode),
    st.sampled_from([b"PUB a 1\r\n", b"PUB a 99\r\nx\r\n", b"HPUB a 12 11\r\n", b"SUB a..b 1\r\n",
                     b"-ERR x\r\n", b"PUB " + b"x" * 40 + b" 0\r\n", b"\r\n", b"MSG a 1 0\r\n"]),
)
NOISY = st.lists(st.one_of(OPS.map(lambda op: op[0]), JUNK), min_size=1, max_size=10).map(b"".join)
LIMITS = st.fixed_dictionaries({"max_control_line": st.sampled_from([16, 64, 4096]),
                                "max_payload": st.sampled_from([8, 1024])})


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(NOISY, CUTS, LIMITS, st.booleans(), st.booleans())
def test_any_stream_any_split_same_outcome(stream, cuts, limits, headers, connect_only):
    """Events, the error text and whether it stopped are the same for every split."""
    kw = dict(limits, headers=headers, connect_only=connect_only)
    whole = outcome([stream], **kw)
    assert outcome(chunks_at(stream, cuts), **kw) == whole
    assert outcome([stream[i:i + 1] for i in range(len(stream))], **kw) == whole


def conn_outcome(chunks):
    conn = new_conn()
    events, err = run_conn(conn, chunks)
    return events, err and err.text, err is not None, conn.data_to_send()


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(NOISY, CUTS)
def test_connection_replies_do_not_depend_on_split(stream, cuts):
    whole = conn_outcome([stream])
    assert conn_outcome(chunks_at(stream, cuts)) == whole
