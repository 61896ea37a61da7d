"""The fault-schedule history checker (bench/history_check.py, issue 30) on small
hand-written histories: each violation it names is found, and a clean history passes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import history_check as hc  # noqa: E402


def ack(t, producer, seq, offset, *, path="kafka", partition=0, first_try=None, dup=False):
    return {"t": t, "ev": "ack", "path": path, "producer": producer, "seq": seq, "partition": partition,
            "offset": offset, "first_try": t if first_try is None else first_try, "dup": dup}


def final(producer, seq, offset, *, path="kafka", partition=0, gateway="gw0"):
    return {"t": 100, "ev": "final", "path": path, "gateway": gateway, "partition": partition, "offset": offset,
            "producer": producer, "seq": seq}


def read(producer, seq, offset, *, path="kafka", partition=0, consumer="m0"):
    return {"t": 50, "ev": "read", "path": path, "consumer": consumer, "partition": partition, "offset": offset,
            "producer": producer, "seq": seq}


def commit(t, partition, offset, group="g"):
    return {"t": t, "ev": "commit", "path": "kafka", "group": group, "consumer": "m0", "partition": partition,
            "offset": offset}


def meta(gateway, view):
    return {"t": 200, "ev": "meta", "gateway": gateway, "view": view}


def clean() -> list[dict]:
    """Two producers on one partition, both read and committed, two gateways agreeing."""
    return [
        {"t": 0, "ev": "config", "dedup_window_s": 120},
        {"t": 1, "ev": "fault", "target": "n1", "action": "kill"},
        ack(2, "a", 0, 0), ack(3, "b", 0, 1), ack(4, "a", 1, 2),
        read("a", 0, 0), read("b", 0, 1), read("a", 1, 2),
        commit(5, 0, 2), commit(6, 0, 3),
        final("a", 0, 0), final("b", 0, 1), final("a", 1, 2),
        {"t": 150, "ev": "drained", "path": "kafka"},
        meta("gw0", {"topics": {"t": 4}}), meta("gw1", {"topics": {"t": 4}}),
    ]


def test_a_clean_history_passes_with_its_figures():
    rep = hc.check(clean())
    assert rep.ok, rep.samples()
    assert rep.figures() == {"acked": 3, "read": 3, "final": 3, "faults": 1, "commits": 2, "lost": 0,
                             "reordered": 0, "duplicated": 0, "misplaced": 0, "offset_regressions": 0,
                             "skipped": 0, "unread": 0, "diverged": 0}


def test_an_acknowledged_message_missing_from_the_final_log_is_lost():
    events = [e for e in clean() if not (e["ev"] == "final" and e["seq"] == 1)]
    rep = hc.check(events)
    assert rep.lost == [{"path": "kafka", "producer": "a", "seq": 1, "partition": 0, "offset": 2}]


def test_a_producer_out_of_order_in_its_partition_is_reordered():
    events = clean() + [ack(7, "a", 2, 3), ack(8, "a", 3, 4), final("a", 3, 3), final("a", 2, 4)]
    rep = hc.check(events)
    # once in the final log, and once because the acks' offsets disagree with it
    assert {(r["seq"], r.get("acked", False)) for r in rep.reordered} == {(2, False)}
    assert len(rep.misplaced) == 2
    acks_backwards = clean() + [ack(7, "a", 2, 4), ack(8, "a", 3, 3), final("a", 3, 3), final("a", 2, 4)]
    assert [r.get("acked") for r in hc.check(acks_backwards).reordered] == [None, True]


def test_other_producers_and_other_partitions_do_not_order_each_other():
    events = clean() + [ack(7, "b", 1, 0, partition=1), ack(8, "a", 2, 1, partition=1),
                        final("b", 1, 0, partition=1), final("a", 2, 1, partition=1)]
    assert hc.check(events).reordered == []


def test_an_idempotent_message_stored_twice_is_duplicated():
    rep = hc.check(clean() + [final("a", 1, 3)])
    assert rep.duplicated == [{"path": "kafka", "partition": 0, "producer": "a", "seq": 1, "offsets": [2, 3]}]


def test_a_jetstream_retry_outside_the_duplicate_window_may_be_stored_twice():
    base = [{"t": 0, "ev": "config", "dedup_window_s": 120}]
    inside = base + [ack(100, "j", 0, 1, path="js", first_try=10), final("j", 0, 1, path="js"),
                     final("j", 0, 2, path="js")]
    outside = base + [ack(200, "j", 0, 1, path="js", first_try=10), final("j", 0, 1, path="js"),
                      final("j", 0, 2, path="js")]
    assert len(hc.check(inside).duplicated) == 1
    assert hc.check(outside).duplicated == []


def test_an_acknowledgement_naming_another_message_s_offset_is_misplaced():
    events = clean() + [ack(7, "b", 1, 1), final("b", 1, 3)]
    rep = hc.check(events)
    assert rep.misplaced == [{"path": "kafka", "producer": "b", "seq": 1, "partition": 0, "offset": 1,
                              "found": ("b", 0)}]
    assert rep.lost == []


def test_a_kafka_ack_without_an_offset_is_judged_on_presence_only():
    # librdkafka reports a batch answered DUPLICATE_SEQUENCE_NUMBER as delivered, offset unknown
    events = clean() + [ack(7, "a", 2, None), final("a", 2, 3), read("a", 2, 3)]
    assert hc.check(events).ok
    assert hc.check(clean() + [ack(7, "a", 2, None)]).lost[0]["seq"] == 2


def test_a_committed_offset_going_back_is_a_regression():
    rep = hc.check(clean() + [commit(7, 0, 1)])
    assert [(r["offset"], r["before"]) for r in rep.offset_regressions] == [(1, 3)]
    # another partition's lower offset is not one
    assert hc.check(clean() + [read("x", 0, 0, partition=1), final("x", 0, 0, partition=1),
                               commit(7, 1, 1)]).offset_regressions == []


def test_a_message_below_the_committed_offset_nobody_read_was_skipped():
    events = [e for e in clean() if not (e["ev"] == "read" and e["offset"] == 1)]
    rep = hc.check(events)
    assert rep.skipped == [{"group": "g", "partition": 0, "offset": 1, "committed": 3}]
    assert rep.unread == [{"path": "kafka", "partition": 0, "offset": 1, "producer": "b", "seq": 0}]


def test_unread_is_judged_only_for_paths_that_drained():
    events = [e for e in clean() if e["ev"] not in ("drained", "commit") and not
              (e["ev"] == "read" and e["offset"] == 1)]
    assert hc.check(events).ok


def test_gateways_listing_different_metadata_diverge():
    events = clean() + [meta("gw1", {"topics": {"t": 3}, "groups": ["g"]})]
    rep = hc.check(events)
    assert rep.diverged == [{"gateway": "gw1", "reference": "gw0",
                             "differs": ["/groups: extra", "/topics/t: 4 != 3"]}]


def test_load_reads_json_lines(tmp_path):
    path = tmp_path / "history.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in clean()) + "\n")
    assert hc.check(hc.load(path)).ok
    assert hc.main([str(path)]) == 0
