"""The server-side assignors of KIP-848's consumer groups: pure functions over plain data.

Theory of operation
-------------------
An assignor maps the group's members to the partitions of the topics they
subscribe to; the coordinator (:mod:`adapters.kafka.consumer_groups`) calls it
whenever the group epoch moves past the target assignment's epoch (Kafka's
``TargetAssignmentBuilder``). Inputs, all plain:

* ``members``: member id -> the topic names it subscribes to;
* ``topics``: topic name -> ``(topic id, partition count)`` for the subscribed
  topics that exist (the group's subscription metadata);
* ``previous``: member id -> ``{topic id: partitions}``, the last target.

The answer is member id -> ``{topic id: frozenset of partitions}`` for every
member (possibly empty). Kafka's two assignors, by the names clients give in
``group.remote.assignor`` (``ConsumerGroupPartitionAssignor.name``):

* ``uniform`` (Kafka's default, ``UniformAssignor``): every partition to one
  subscriber, balanced (among members with the same subscription the counts
  differ by at most one) and sticky (a partition stays with its previous owner
  unless balance needs it elsewhere), so a member joining or leaving moves as
  few partitions as balance needs. Ferry's version is a greedy one: keep what
  is still valid, give each unowned partition to its least-loaded subscriber,
  then move partitions from the most loaded member to a subscriber holding at
  least two fewer until none can move. Every move lowers the sum of squared
  loads, so it ends.
* ``range`` (``RangeAssignor``): per topic, its subscribers in member-id order
  each take a contiguous range, the first ``count % n`` one more; members with
  the same subscription get the same partition numbers of co-partitioned topics.
"""

from __future__ import annotations

import uuid

Assignment = dict  # {topic id (uuid.UUID): frozenset[int]}
UNIFORM, RANGE = "uniform", "range"


def _subscribers(members: dict, topics: dict) -> dict:
    """topic id -> (sorted subscriber ids, partition count), topics with subscribers only."""
    out = {}
    for name, (tid, count) in topics.items():
        subs = sorted(m for m, names in members.items() if name in names)
        if subs and count > 0:
            out[tid] = (subs, count)
    return out


def _as_assignment(members: dict, owner: dict) -> dict:
    out: dict = {m: {} for m in members}
    for (tid, p), m in owner.items():
        out[m].setdefault(tid, set()).add(p)
    return {m: {tid: frozenset(parts) for tid, parts in a.items()} for m, a in out.items()}


def uniform(members: dict, topics: dict, previous: dict) -> dict:
    """The ``uniform`` assignment (module docstring)."""
    eligible = _subscribers(members, topics)
    allowed = {tid: set(subs) for tid, (subs, _n) in eligible.items()}
    owner: dict[tuple[uuid.UUID, int], str] = {}
    load = {m: 0 for m in members}
    for m in sorted(previous):  # 1. stickiness: what is still valid stays
        if m not in members:
            continue
        for tid, parts in previous[m].items():
            if m not in allowed.get(tid, ()):
                continue
            count = eligible[tid][1]
            for p in sorted(parts):
                if p < count and (tid, p) not in owner:
                    owner[(tid, p)] = m
                    load[m] += 1
    for tid in sorted(eligible, key=str):  # 2. unowned partitions to the least loaded subscriber
        subs, count = eligible[tid]
        for p in range(count):
            if (tid, p) not in owner:
                m = min(subs, key=lambda x: (load[x], x))
                owner[(tid, p)] = m
                load[m] += 1
    held: dict[str, list] = {m: [] for m in members}
    for key, m in owner.items():
        held[m].append(key)
    while True:  # 3. balance (module docstring)
        moved = False
        for src in sorted(members, key=lambda x: (-load[x], x)):
            for key in sorted(held[src], key=lambda k: (str(k[0]), -k[1])):
                dst = min(eligible[key[0]][0], key=lambda x: (load[x], x))
                if load[dst] <= load[src] - 2:
                    held[src].remove(key)
                    held[dst].append(key)
                    owner[key] = dst
                    load[src] -= 1
                    load[dst] += 1
                    moved = True
                    break
            if moved:
                break
        if not moved:
            return _as_assignment(members, owner)


def range_(members: dict, topics: dict, previous: dict) -> dict:
    """The ``range`` assignment (module docstring); ``previous`` is not used."""
    owner = {}
    for tid, (subs, count) in _subscribers(members, topics).items():
        share, extra = divmod(count, len(subs))
        start = 0
        for i, m in enumerate(subs):
            size = share + (1 if i < extra else 0)
            for p in range(start, start + size):
                owner[(tid, p)] = m
            start += size
    return _as_assignment(members, owner)


ASSIGNORS = {UNIFORM: uniform, RANGE: range_}  # the first is the default (group.consumer.assignors)
DEFAULT_ASSIGNOR = UNIFORM

__all__ = ["ASSIGNORS", "DEFAULT_ASSIGNOR", "RANGE", "UNIFORM", "range_", "uniform"]
