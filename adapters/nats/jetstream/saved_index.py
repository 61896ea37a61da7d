"""A JetStream subject index in its saved form, encoded and decoded in steps (no trio, no broker).

Theory of operation
-------------------
A stream whose visible messages are not a range of its log (a KV bucket,
``interest``/``workqueue`` retention, filtered purges or deletes:
``index.needs_index``) keeps a :class:`index.SubjectIndex` of its live
sequences. Rebuilt from the log after every start, it made a KV bucket's
first calls wait for a read of the whole bucket (issue 30: STREAM.LIST
0.37-2.9 s). nats-server saves its per-subject state with the rest of the
stream state (server/filestore.go ``writeFullState``); Ferry saves the index
in the same checkpoint document as the per-subject counts and the msg-id
window (``saved_state.SavedState``), as the part this module encodes:

- ``to`` (the last sequence it looked at: the document's ``to``), ``head``,
  the config values it depends on (``per_subject``, ``rollups``, ``ttls``:
  a document made under another config is not used);
- ``seqs``: a list of JSON texts, each an object ``subject -> runs`` holding
  at most :data:`CHUNK_SEQS` sequences, a subject's runs ascending (one
  subject may continue in the next text); a run is a sequence or
  ``[first, step, count]`` (a KV key is one sequence, a subject of a
  round-robin stream one run per :data:`CHUNK_SEQS`);
- ``expiry``: the TTL heap as it stands (JSON texts of ``[ns, seq]`` pairs,
  still a heap in that order).

Both directions run in steps of about :data:`CHUNK_SEQS` sequences, the
caller running other tasks between two (issue 30: no step over ~10 ms). The
encoder copies ``live`` in its first step (one C-level dict copy), so what it
encodes is the index at that moment. The decoder hands back an index at
``to``; the removals saved since (``floors``, ``deleted``: kept up to date
by ``removed.RemovedRecords``, which a ``kill -9`` between two checkpoints
does not lose) are applied to it, and the records after ``to`` are added
the usual way (``JetStreams._index_catch_up``), so it equals one rebuilt
from the log. Past :data:`MAX_INDEX_BYTES` the index is left out of the
document (it is rebuilt from the log in slices after a start, as before).
"""

from __future__ import annotations

import heapq
import json
from collections import deque
from itertools import islice, repeat
from typing import Iterator

from .index import SubjectIndex

# Sequences per encoded text and per step either way: with a 100,000-key bucket a
# step took 4-16 ms encoding and 4-12 ms decoding here (load 2-4; the warm-up's slice
# is ~10 ms, driver.WARM_SLICE).
CHUNK_SEQS = 8192
# Runs per encoded text (a KV bucket is one run per key): bounds a text, and a step.
CHUNK_RUNS = 2500
# The index part's encoded bytes past which it is not saved: with a full msg-id
# window (~5 MB) the document stays under saved_state.MAX_STATE_BYTES (32 MiB).
# ~30 bytes per KV key: about 800,000 keys; a round-robin stream's subjects cost
# a few bytes per 8,192 sequences.
MAX_INDEX_BYTES = 24 * 1024 * 1024


def encode(idx: SubjectIndex) -> Iterator[None | bytes]:
    """``idx`` as the saved part (module doc), JSON: yields None between
    steps, then the part's bytes, or nothing when over :data:`MAX_INDEX_BYTES`.
    The texts are JSON string literals here (the first document layout,
    still read); ``saved_state`` writes :func:`encode_parts`' texts as lines."""
    parts = None
    for parts in encode_parts(idx):
        if parts is None:
            yield None
    if parts is not None:
        meta, texts, pairs = parts
        yield b"".join([_dumps(meta)[:-1].encode(), b',"seqs":[', b",".join(json.dumps(t.decode()).encode()
                        for t in texts), b'],"expiry":[', b",".join(json.dumps(p.decode()).encode() for p in pairs),
                        b"]}"])


def encode_parts(idx: SubjectIndex) -> Iterator[None | tuple[dict, list[bytes], list[bytes]]]:
    """``idx`` in steps (yields None between two), then ``(meta, seqs,
    expiry)``: the part's scalar fields and its two lists of JSON texts
    (module doc), or nothing when over :data:`MAX_INDEX_BYTES`."""
    live, expiry = idx.live.copy(), list(idx.expiry)        # the state at this moment
    head = idx.first()
    part = {"to": idx.to, "head": idx.to + 1 if head is None else head, "per_subject": idx.per_subject,
            "rollups": idx.rollups, "ttls": idx.ttls}
    # Runs in flat lists (no container per subject: a 100,000-key bucket made 200,000
    # lists, and the cycle collector's passes over them took 40-250 ms here).
    firsts: list[int] = []
    steps: list[int] = []
    counts: list[int] = []
    prevs: list[int] = []                   # the same subject's previous run, -1 for none
    open_runs: dict[str, int] = {}          # subject -> its last run
    items = iter(live.items())
    while True:
        batch = list(islice(items, CHUNK_SEQS))
        if not batch:
            break
        yield None
        for seq, subject in batch:          # per subject ascending: a built index adds in order,
            i = open_runs.get(subject)      # a restored one per subject, then the records after it
            if i is not None:
                count = counts[i]
                if count == 1:
                    steps[i], counts[i] = seq - firsts[i], 2
                    continue
                if seq - firsts[i] == steps[i] * count and count < CHUNK_SEQS:
                    counts[i] = count + 1
                    continue
            open_runs[subject] = len(firsts)
            firsts.append(seq)
            steps.append(0)
            counts.append(1)
            prevs.append(-1 if i is None else i)
    texts: list[bytes] = []                 # each a JSON object's text
    chunk: dict[str, list] = {}
    size = n_seqs = n_runs = 0
    for subject, last in open_runs.items():
        mine = []
        while last >= 0:
            mine.append(last)
            last = prevs[last]
        for i in reversed(mine):
            first, step, count = firsts[i], steps[i], counts[i]
            if n_seqs + count > CHUNK_SEQS or n_runs >= CHUNK_RUNS:
                yield None
                texts.append(_text(chunk))
                size += len(texts[-1])
                if size > MAX_INDEX_BYTES:
                    return                  # left out: rebuilt from the log after a start
                chunk, n_seqs, n_runs = {}, 0, 0
            chunk.setdefault(subject, []).append(first if count == 1 else [first, step, count])
            n_seqs, n_runs = n_seqs + count, n_runs + 1
    if chunk:
        texts.append(_text(chunk))
    pairs = []
    for i in range(0, len(expiry), CHUNK_SEQS):
        yield None
        pairs.append(_text(expiry[i:i + CHUNK_SEQS]))
    if sum(map(len, texts)) + sum(map(len, pairs)) <= MAX_INDEX_BYTES:
        yield part, texts, pairs


def matches(part, config: dict) -> bool:
    """Whether a saved part was made under the same index-relevant config."""
    return (isinstance(part, dict) and part.get("per_subject") == config["max_msgs_per_subject"]
            and part.get("rollups") == bool(config["allow_rollup_hdrs"])
            and part.get("ttls") == bool(config.get("allow_msg_ttl", False)))


def decode(part: dict, to: int, floors: dict[str, int], deleted: set[int]) -> Iterator[None | SubjectIndex]:
    """The saved ``part`` (of a document at ``to``) back into an index, a
    text per step (yields None between), then the index with ``floors`` and
    ``deleted`` applied (module doc). Raises ValueError (or TypeError) on a
    damaged part: the caller rebuilds from the log then."""
    if part.get("to") != to or not isinstance(part.get("head"), int) or not 1 <= part["head"] <= to + 1:
        raise ValueError("saved index does not match its document")
    idx = SubjectIndex(part["head"], part["per_subject"], part["rollups"], part["ttls"], floors, deleted)
    idx.to = to
    live, subjects = idx.live, idx.subjects
    for text in part["seqs"]:
        yield None
        chunk = json.loads(text)
        if not isinstance(chunk, dict):
            raise ValueError("bad saved index chunk")
        for subject, runs in chunk.items():
            seqs = subjects.get(subject)
            if seqs is None and len(runs) == 1 and type(runs[0]) is int:   # one seq: a KV key
                seq = runs[0]
                if not idx.head <= seq <= to or seq in live:
                    raise ValueError("saved index runs out of order")
                subjects[subject], live[seq] = (seq,), subject
                continue
            if seqs is None:
                seqs = subjects[subject] = deque()
            elif type(seqs) is tuple:
                seqs = subjects[subject] = deque(seqs)
            low = seqs[-1] + 1 if seqs else idx.head
            for run in runs:
                if type(run) is int:
                    first, step, count = run, 1, 1
                else:
                    first, step, count = run
                    if not (type(first) is int and type(step) is int and type(count) is int):
                        raise ValueError("bad saved index run")
                span = range(first, first + step * count, step)
                if count < 1 or step < 1 or first < low or span[-1] > to:
                    raise ValueError("saved index runs out of order")
                seqs.extend(span)
                had = len(live)
                live.update(zip(span, repeat(subject)))
                if len(live) != had + count:
                    raise ValueError("a saved sequence under two subjects")
                low = span[-1] + 1
    for text in part["expiry"]:
        yield None
        pairs = json.loads(text)
        if not all(isinstance(p, list) and len(p) == 2 and all(isinstance(x, int) for x in p) for p in pairs):
            raise ValueError("bad saved index expiry")
        idx.expiry.extend(tuple(p) for p in pairs)
    heapq.heapify(idx.expiry)               # a no-op on the saved heap; repairs a damaged order
    # What was removed after the save (a kill -9 between two checkpoints keeps these).
    hide = idx.hide
    for i, seq in enumerate(list(deleted)):
        if i % CHUNK_SEQS == CHUNK_SEQS - 1:
            yield None
        if seq <= to:
            hide(seq)
    for subject, floor in list(floors.items()):
        while (seqs := subjects.get(subject)) and seqs[0] < floor:   # hide may swap a deque for a tuple
            hide(seqs[0])
    idx.version = 0                          # as a rebuilt index: no hide events to report
    idx.hidden.clear()
    yield idx


def _dumps(doc) -> str:
    return json.dumps(doc, separators=(",", ":"))


def _text(doc) -> bytes:
    """``doc``'s JSON text (decoded a text per step); never holds a newline, so
    ``saved_state`` can write each text as one line."""
    return _dumps(doc).encode()


__all__ = ["CHUNK_SEQS", "MAX_INDEX_BYTES", "decode", "encode", "encode_parts", "matches"]
