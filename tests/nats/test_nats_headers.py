"""adapters.nats.headers: ADR-4 header blocks (seeds/002_*), parse and encode."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.nats.errors import NatsHeaderError
from adapters.nats.headers import (
    EMPTY_BLOCK,
    HeaderBlock,
    encode_headers,
    no_responders_block,
    parse_headers,
)

# The ADR-4 examples (seed 002): HDR_LEN counts from "NATS/1.0" through the empty line.
ADR4_BLOCKS = [
    (b"NATS/1.0\r\nHeader: X\r\n\r\n", HeaderBlock((("Header", "X"),))),
    (b"NATS/1.0\r\nHeader1: X\r\nHeader1: Y\r\nHeader2: Z\r\n\r\n",
     HeaderBlock((("Header1", "X"), ("Header1", "Y"), ("Header2", "Z")))),
]


@pytest.mark.parametrize(("raw", "block"), ADR4_BLOCKS)
def test_adr4_examples(raw, block):
    assert parse_headers(raw) == block
    assert encode_headers(block) == raw


def test_adr4_declared_lengths():
    assert len(ADR4_BLOCKS[0][0]) == 23 and len(ADR4_BLOCKS[1][0]) == 48


def test_repeated_keys_keep_order_and_case():
    block = parse_headers(b"NATS/1.0\r\nA: 1\r\na: 2\r\nA: 3\r\n\r\n")
    assert block.items == (("A", "1"), ("a", "2"), ("A", "3"))
    assert block.get("A") == "1" and block.get_all("A") == ["1", "3"] and block.get_all("a") == ["2"]
    assert block.get("missing") is None


@pytest.mark.parametrize(("raw", "status", "description"), [
    (b"NATS/1.0 503\r\n\r\n", "503", ""),
    (b"NATS/1.0 404 No Messages\r\n\r\n", "404", "No Messages"),
    (b"NATS/1.0 100 Idle Heartbeat\r\n\r\n", "100", "Idle Heartbeat"),
    (b"NATS/1.0  408   Request Timeout \r\n\r\n", "408", "Request Timeout"),
])
def test_status_line_is_not_a_header(raw, status, description):
    block = parse_headers(raw)
    assert (block.status, block.description, block.items) == (status, description, ())


def test_empty_block_and_no_responders_block():
    assert parse_headers(EMPTY_BLOCK) == HeaderBlock()
    assert len(EMPTY_BLOCK) == 12
    raw = no_responders_block("svc.nobody")
    assert len(raw) == 32 + len("svc.nobody")   # nats.md section 9
    block = parse_headers(raw)
    assert (block.status, block.items) == ("503", (("Nats-Subject", "svc.nobody"),))


def test_values_are_trimmed_and_may_be_empty():
    block = parse_headers(b"NATS/1.0\r\nK:\r\nL:   \r\nM:\tv w \t\r\nN:x\r\n\r\n")
    assert block.items == (("K", ""), ("L", ""), ("M", "v w"), ("N", "x"))


def test_value_bytes_survive_exactly():
    raw = "NATS/1.0\r\nK: é\r\n\r\n".encode().replace(b"\xc3\xa9", b"\xff\xfe")
    assert encode_headers(parse_headers(raw)) == raw


@pytest.mark.parametrize("raw", [
    b"",
    b"NATS/1.0",
    b"NATS/2.0\r\n\r\n",
    b"HTTP/1.1 200\r\n\r\n",
    b"NATS/1.0\r\n",                        # no final empty line
    b"NATS/1.0\r\nA: 1\r\n",                # no final empty line
    b"NATS/1.0\r\n\r\nextra",               # bytes after the block
    b"NATS/1.0\r\n\r\n\r\n",                # two empty lines
    b"NATS/1.0x\r\n\r\n",                   # junk after the version
    b"NATS/1.0 5O3\r\n\r\n",                # status not three digits
    b"NATS/1.0 5030\r\n\r\n",
    b"NATS/1.0 \r\n\r\n",                   # blank status
    b"NATS/1.0\r\nNoColon\r\n\r\n",
    b"NATS/1.0\r\n: empty key\r\n\r\n",
    b"NATS/1.0\r\nBad Key: v\r\n\r\n",      # space in the key (RFC 822 field name)
    b"NATS/1.0\r\nKey : v\r\n\r\n",         # space before the colon
    b"NATS/1.0\r\nK\xc3\xa9y: v\r\n\r\n",   # non-ASCII key
    b"NATS/1.0\r\nA: 1\r\n folded\r\n\r\n",  # obsolete line folding
    b"NATS/1.0\r\nA: 1\nB: 2\r\n\r\n",      # bare LF
    b"NATS/1.0\r\nA: 1\rB\r\n\r\n",         # bare CR
    b"NATS/1.0 503 a\rb\r\n\r\n",
])
def test_malformed_blocks(raw):
    with pytest.raises(NatsHeaderError):
        parse_headers(raw)


@pytest.mark.parametrize("block", [
    HeaderBlock((("Bad Key", "v"),)),
    HeaderBlock((("", "v"),)),
    HeaderBlock((("K:", "v"),)),
    HeaderBlock((("K", "a\r\nInjected: 1"),)),
    HeaderBlock((("K", "a\nb"),)),
    HeaderBlock(status="50"),
    HeaderBlock(status="abc"),
    HeaderBlock(description="no status"),
    HeaderBlock(status="503", description="a\r\n"),
])
def test_unencodable_blocks(block):
    with pytest.raises(NatsHeaderError):
        encode_headers(block)


def test_encode_is_cached_by_value():
    a = HeaderBlock((("K", "v"),))
    b = HeaderBlock((("K", "v"),))
    assert encode_headers(a) is encode_headers(b)


# -- properties ---------------------------------------------------------------------
KEY_CHARS = "".join(chr(c) for c in range(33, 127) if c != ord(":"))
keys = st.text(KEY_CHARS, min_size=1, max_size=12)
values = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"), max_size=20).map(
    lambda v: v.strip(" \t"))
descriptions = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"),
                       max_size=15).map(lambda d: d.strip(" \t"))
statuses = st.one_of(st.just(("", "")), st.tuples(st.from_regex(r"\A[0-9]{3}\Z"), descriptions))


@st.composite
def header_blocks(draw):
    pool = draw(st.lists(keys, min_size=1, max_size=4))
    items = draw(st.lists(st.tuples(st.sampled_from(pool), values), max_size=8))  # repeated keys likely
    status, description = draw(statuses)
    return HeaderBlock(tuple(items), status, description)


@settings(max_examples=200)
@given(header_blocks())
def test_round_trip_block(block):
    raw = encode_headers(block)
    assert parse_headers(raw) == block
    assert encode_headers(parse_headers(raw)) == raw


@settings(max_examples=200)
@given(st.binary(max_size=60))
def test_parse_never_fails_unexpectedly(raw):
    try:
        block = parse_headers(b"NATS/1.0\r\n" + raw)
    except NatsHeaderError:
        return
    assert encode_headers(block)   # whatever parsed can be written again
