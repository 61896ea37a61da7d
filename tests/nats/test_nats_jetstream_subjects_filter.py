"""STREAM.INFO ``subjects_filter``: the per-subject message counts, paged (issue 30).

nats-server answers ``state.subjects`` from its per-subject state and pages it
at JSMaxSubjectDetails (100,000) with ``offset``, ``total`` and ``limit``
(server/jetstream_api.go ``jsStreamInfoRequest``). Ferry answers it from the
per-subject counts or the subject index (no scan of the log). The answers are
compared with the real ``nats-server -js``; the paging rule past the limit is
checked in-process with a smaller limit (a real 100,001-subject stream costs
minutes to publish here).
"""

from __future__ import annotations

import json

import nats
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_nats_jetstream_streams import assert_same_results, nats_server_js, needs_server, raw

from adapters.nats.jetstream import api as js_api
from adapters.nats.jetstream.api import enable
from adapters.nats.jetstream.index import matching, subject_totals
from core.addressing import SUBJECT_HEADER
from core.broker import Broker
from core.log import AppendInput
from core.message import Headers
from core.subjects import subject_matches


def info(nc, stream: str, body: dict):
    return raw(nc, f"$JS.API.STREAM.INFO.{stream}", body)


async def script(url: str) -> list:
    nc = await nats.connect(url)
    js = nc.jetstream()
    out: list = []
    await js.add_stream(name="SF", subjects=["sf.>"])
    for subject, n in [("sf.a", 3), ("sf.b.x", 2), ("sf.b.y", 1), ("sf.c", 1)]:
        for _ in range(n):
            await js.publish(subject, b"m")
    for pattern in [">", "sf.>", "sf.b.>", "sf.*", "sf.*.y", "sf.a", "sf.none", "other.>"]:
        out.append(await info(nc, "SF", {"subjects_filter": pattern}))
    out.append(await info(nc, "SF", {"subjects_filter": ">", "offset": 1}))    # sorted, from the 2nd
    out.append(await info(nc, "SF", {"subjects_filter": ">", "offset": 9}))    # past the end
    out.append(await info(nc, "SF", {"offset": 2}))                          # no filter: no details
    await js.purge_stream("SF", subject="sf.a")                              # the index from now on
    out.append(await info(nc, "SF", {"subjects_filter": ">"}))
    kv = await js.create_key_value(bucket="sfkv", history=2)                 # an indexed stream
    for key, value in [("k1", b"1"), ("k2", b"2"), ("k1", b"3"), ("k1", b"4"), ("k3", b"5")]:
        await kv.put(key, value)
    await kv.delete("k3")
    out.append(await info(nc, "KV_sfkv", {"subjects_filter": "$KV.sfkv.>"}))
    out.append(await info(nc, "KV_sfkv", {"subjects_filter": "$KV.sfkv.k1"}))
    await nc.close()
    return out


@pytest.mark.slow
@needs_server
def test_subjects_filter_answers_as_nats_server(tmp_path):
    with nats_server_js(tmp_path / "real") as real_url:
        assert_same_results(tmp_path, real_url, script)


def test_subject_details_page_past_the_limit(tmp_path, monkeypatch):
    """Past the limit (or with an offset) the sorted subjects from ``offset``, at most
    the limit of them, with the total; nats-server's rule at a limit of 3."""
    monkeypatch.setattr(js_api, "SUBJECT_DETAILS_LIMIT", 3)
    with Broker.open(tmp_path) as broker:
        api = enable(broker)
        api.handle("$JS.API.STREAM.CREATE.P", json.dumps({"name": "P", "subjects": ["p.>"]}).encode())
        stream = api.streams.get("P")
        records = []
        for subject in ["p.e", "p.d", "p.c", "p.b", "p.a", "p.a"]:
            headers = Headers()
            headers.add(SUBJECT_HEADER, subject)
            records.append(AppendInput(payload=b"x", headers=headers.encode()))
        broker.append("jetstream", stream.topic_id, records, partition=0)

        def details(body):
            doc = json.loads(api.handle("$JS.API.STREAM.INFO.P", json.dumps(body).encode()))
            return doc["total"], doc["offset"], doc["limit"], doc["state"].get("subjects")
        assert details({"subjects_filter": "p.>"}) == (5, 0, 3, {"p.a": 2, "p.b": 1, "p.c": 1})
        assert details({"subjects_filter": "p.>", "offset": 3}) == (5, 3, 3, {"p.d": 1, "p.e": 1})
        assert details({"subjects_filter": "p.>", "offset": 7}) == (5, 7, 3, None)
        assert details({"subjects_filter": "p.*", "offset": 1}) == (5, 1, 3, {"p.b": 1, "p.c": 1, "p.d": 1})
        assert details({"subjects_filter": "p.a"}) == (1, 0, 3, {"p.a": 2})
        assert details({"subjects_filter": "q.>"}) == (0, 0, 0, None)
        assert details({}) == (0, 0, 0, None)


TOKENS = st.sampled_from(["a", "b", "c"])
SUBJECT = st.lists(TOKENS, min_size=1, max_size=4).map(".".join)
PATTERN = st.lists(st.sampled_from(["a", "b", "*"]), min_size=1, max_size=3).flatmap(
    lambda head: st.sampled_from([".".join(head), ".".join(head) + ".>", ">"]))


@settings(max_examples=300, deadline=None)
@given(subjects=st.lists(SUBJECT, max_size=12, unique=True), patterns=st.lists(PATTERN, max_size=3),
       bound=st.sampled_from([(), (">",), ("a.>",), ("a.>", "b.>")]))
def test_matching_and_totals_agree_with_subject_matches(subjects, patterns, bound):
    """The shortcuts (lookup, prefix, a pattern covering the stream's own) pick what
    subject_matches picks, for subjects the stream's patterns take."""
    by_subject = {s: (i + 1,) * (i % 3 + 1) for i, s in enumerate(subjects)
                  if not bound or any(subject_matches(b, s) for b in bound)}
    want = [v for s, v in by_subject.items() if not patterns or any(subject_matches(p, s) for p in patterns)]
    assert sorted(matching(by_subject, patterns, list(bound))) == sorted(want)
    for p in patterns:
        assert subject_totals(by_subject, p) == {s: len(v) for s, v in by_subject.items() if subject_matches(p, s)}
