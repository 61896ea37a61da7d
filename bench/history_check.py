"""Check a fault-schedule history (bench/fault_schedule.py, issue 30): pure functions, no I/O
beyond reading the file, importable by tests (tests/gateway/test_history_check.py).

A history is a list of events, one JSON object per line of the run's ``history.jsonl``, each
with its wall time ``t`` and its kind ``ev``:

* ``ack``    a writer's message was acknowledged: ``path`` (``kafka`` or ``js``), ``producer``,
             ``seq`` (the writer's own counter), ``partition``, ``offset`` (Kafka offset, or the
             JetStream stream sequence), ``first_try`` (wall time of the first attempt) and, for
             JetStream, ``dup`` (the PubAck said ``duplicate``); ``offset`` may be null (librdkafka
             reports a retry answered DUPLICATE_SEQUENCE_NUMBER as delivered, offset unknown);
* ``fail``   a message given up without an acknowledgement (it may or may not be stored);
* ``read``   a consumer got a message: ``path``, ``consumer``, ``partition``, ``offset``,
             ``producer``, ``seq``;
* ``commit`` a Kafka group member's commit succeeded: ``group``, ``partition``, ``offset``
             (the next offset to read, Kafka's meaning);
* ``final``  one message of the end-state log read after every fault healed: ``path``,
             ``partition``, ``offset``, ``producer``, ``seq``;
* ``meta``   the metadata one ``gateway`` lists after healing (``view``: any JSON value);
* ``drained`` a ``path``'s consumers caught up with the final log after healing;
* ``fault``, ``config``, ``note``: recorded, counted, not judged (``config`` carries
             ``dedup_window_s``, JetStream's duplicate window).

What is a violation (each list in :class:`Report` holds one entry per case):

* ``lost``: an acknowledged message that is not in the final log (acknowledged means stored on
  a quorum, docs/scale-out.md "What is guaranteed");
* ``reordered``: within one partition, one producer's messages in the final log, or its acked
  offsets, not in the order of its own counter (Kafka's per-partition order for one producer;
  a JetStream publisher that waits for each ack);
* ``duplicated``: a message stored twice on an idempotent path: a Kafka idempotent producer,
  or a JetStream publish with a ``Nats-Msg-Id`` whose attempts all fell inside the duplicate
  window (past it nats-server itself would store it again, so that case is not counted);
* ``misplaced``: an acknowledgement names an offset at which the final log holds another message;
* ``offset_regressions``: a group's committed offset for a partition lower than one committed
  before it (in wall time);
* ``skipped``: below a group's last committed offset, a final-log message no member ever read;
* ``unread``: on a path recorded as ``drained``, a final-log message no consumer read;
* ``diverged``: after healing, a gateway whose metadata view differs from the first gateway's.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

# nats-server's default duplicate window (2 minutes, JetStream stream config
# ``duplicate_window``); a ``config`` event in the history overrides it.
DEFAULT_DEDUP_WINDOW_S = 120.0
SAMPLE = 10  # violations kept per kind in a summary line (the lists hold all of them)


@dataclass
class Report:
    acked: int = 0
    read: int = 0
    final: int = 0
    faults: int = 0
    commits: int = 0
    lost: list = field(default_factory=list)
    reordered: list = field(default_factory=list)
    duplicated: list = field(default_factory=list)
    misplaced: list = field(default_factory=list)
    offset_regressions: list = field(default_factory=list)
    skipped: list = field(default_factory=list)
    unread: list = field(default_factory=list)
    diverged: list = field(default_factory=list)

    VIOLATIONS = ("lost", "reordered", "duplicated", "misplaced", "offset_regressions", "skipped",
                  "unread", "diverged")

    @property
    def ok(self) -> bool:
        return not any(getattr(self, name) for name in self.VIOLATIONS)

    def figures(self) -> dict:
        """Counts only: the run's one-line summary."""
        out = {k: getattr(self, k) for k in ("acked", "read", "final", "faults", "commits")}
        out.update({name: len(getattr(self, name)) for name in self.VIOLATIONS})
        return out

    def samples(self) -> dict:
        return {name: getattr(self, name)[:SAMPLE] for name in self.VIOLATIONS if getattr(self, name)}


def load(path: str | Path) -> list[dict]:
    """The events of a history file (blank lines skipped)."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def check(events: list[dict]) -> Report:
    """Judge a history; the report's lists hold every violation found."""
    rep = Report()
    by: dict[str, list[dict]] = defaultdict(list)
    for e in sorted(events, key=lambda e: e["t"]):
        by[e["ev"]].append(e)
    window = next((e["dedup_window_s"] for e in by["config"] if "dedup_window_s" in e), DEFAULT_DEDUP_WINDOW_S)
    rep.acked, rep.read, rep.final = len(by["ack"]), len(by["read"]), len(by["final"])
    rep.faults, rep.commits = len(by["fault"]), len(by["commit"])
    final = _final_logs(by["final"])
    _lost_and_misplaced(rep, by["ack"], final)
    _order(rep, by["ack"], final)
    _duplicates(rep, by["ack"], final, window)
    _commits(rep, by["commit"], by["read"], final)
    _unread(rep, by["drained"], by["read"], final)
    _convergence(rep, by["meta"])
    return rep


def _key(e: dict) -> tuple[str, str, int]:
    return e["path"], e["producer"], e["seq"]


def _final_logs(finals: list[dict]) -> dict[tuple[str, int], dict[int, tuple[str, int]]]:
    """(path, partition) -> offset -> (producer, seq). The same offset read twice (through
    two gateways) must hold the same message; a disagreement is kept as both."""
    logs: dict[tuple[str, int], dict[int, tuple[str, int]]] = defaultdict(dict)
    for e in finals:
        logs[e["path"], e["partition"]].setdefault(e["offset"], (e["producer"], e["seq"]))
    return logs


def _lost_and_misplaced(rep: Report, acks: list[dict], final: dict) -> None:
    stored = {(path, *msg) for (path, _p), log in final.items() for msg in log.values()}
    for a in acks:
        if _key(a) not in stored:
            rep.lost.append({"path": a["path"], "producer": a["producer"], "seq": a["seq"],
                             "partition": a["partition"], "offset": a["offset"]})
            continue
        if a["offset"] is None:  # librdkafka reports a retry answered DUPLICATE_SEQUENCE_NUMBER without one
            continue
        at = final.get((a["path"], a["partition"]), {}).get(a["offset"])
        if at != (a["producer"], a["seq"]):
            rep.misplaced.append({"path": a["path"], "producer": a["producer"], "seq": a["seq"],
                                  "partition": a["partition"], "offset": a["offset"], "found": at})


def _order(rep: Report, acks: list[dict], final: dict) -> None:
    # The final log, per partition and producer: first occurrences in offset order.
    for (path, part), log in final.items():
        last: dict[str, int] = {}
        seen: set[tuple[str, int]] = set()
        for offset in sorted(log):
            producer, seq = log[offset]
            if (producer, seq) in seen:
                continue
            seen.add((producer, seq))
            if producer in last and seq < last[producer]:
                rep.reordered.append({"path": path, "partition": part, "producer": producer, "seq": seq,
                                      "offset": offset, "after_seq": last[producer]})
            last[producer] = max(seq, last.get(producer, seq))
    # The acknowledgements: a higher counter never gets a lower offset in one partition.
    acked: dict[tuple[str, str, int], list[tuple[int, int]]] = defaultdict(list)
    for a in acks:
        if not a.get("dup") and a["offset"] is not None:
            acked[a["path"], a["producer"], a["partition"]].append((a["seq"], a["offset"]))
    for (path, producer, part), pairs in acked.items():
        pairs.sort()
        for (s0, o0), (s1, o1) in zip(pairs, pairs[1:]):
            if o1 <= o0:
                rep.reordered.append({"path": path, "partition": part, "producer": producer, "seq": s1,
                                      "offset": o1, "after_seq": s0, "acked": True})


def _duplicates(rep: Report, acks: list[dict], final: dict, window: float) -> None:
    # A JetStream message whose attempts span more than the window may legitimately be
    # stored twice (nats-server forgets the id after ``duplicate_window``).
    outside = {_key(a) for a in acks if a["path"] == "js" and a["t"] - a.get("first_try", a["t"]) > window}
    for (path, part), log in final.items():
        counts = Counter(log.values())
        for (producer, seq), n in sorted(counts.items()):
            if n > 1 and (path, producer, seq) not in outside:
                offsets = sorted(o for o, m in log.items() if m == (producer, seq))
                rep.duplicated.append({"path": path, "partition": part, "producer": producer, "seq": seq,
                                       "offsets": offsets})


def _commits(rep: Report, commits: list[dict], reads: list[dict], final: dict) -> None:
    high: dict[tuple[str, int], dict] = {}
    for c in commits:  # already in wall-time order
        k = (c["group"], c["partition"])
        prev = high.get(k)
        if prev is not None and c["offset"] < prev["offset"]:
            rep.offset_regressions.append({"group": c["group"], "partition": c["partition"],
                                           "offset": c["offset"], "before": prev["offset"],
                                           "t": c["t"], "before_t": prev["t"]})
        if prev is None or c["offset"] >= prev["offset"]:
            high[k] = c
    read = {(r["partition"], r["offset"]) for r in reads if r["path"] == "kafka"}
    for (group, part), c in sorted(high.items()):
        log = final.get(("kafka", part), {})
        for offset in sorted(o for o in log if o < c["offset"] and (part, o) not in read):
            rep.skipped.append({"group": group, "partition": part, "offset": offset,
                                "committed": c["offset"]})


def _unread(rep: Report, drained: list[dict], reads: list[dict], final: dict) -> None:
    for path in sorted({d["path"] for d in drained}):
        got = {(r["producer"], r["seq"]) for r in reads if r["path"] == path}
        for (p, part), log in sorted(final.items()):
            if p != path:
                continue
            for offset, msg in sorted(log.items()):
                if msg not in got:
                    rep.unread.append({"path": path, "partition": part, "offset": offset,
                                       "producer": msg[0], "seq": msg[1]})


def _convergence(rep: Report, metas: list[dict]) -> None:
    views: dict[str, object] = {}
    for m in metas:  # the last view of each gateway counts
        views[m["gateway"]] = m["view"]
    if len(views) < 2:
        return
    names = sorted(views)
    ref = views[names[0]]
    for name in names[1:]:
        if views[name] != ref:
            rep.diverged.append({"gateway": name, "reference": names[0], "differs": _diff(ref, views[name])})


def _diff(a, b, path: str = "") -> list[str]:
    """Where two JSON values differ (paths, at most SAMPLE of them)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for k in sorted(set(a) | set(b), key=str):
            if k not in a or k not in b:
                out.append(f"{path}/{k}: {'missing' if k not in b else 'extra'}")
            else:
                out += _diff(a[k], b[k], f"{path}/{k}")
        return out[:SAMPLE]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description="check a fault-schedule history (issue 30)")
    ap.add_argument("history", help="history.jsonl written by bench/fault_schedule.py")
    a = ap.parse_args(argv)
    rep = check(load(a.history))
    print(json.dumps(rep.figures()))
    for name, sample in rep.samples().items():
        print(f"{name}: {json.dumps(sample)}")
    return 0 if rep.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
