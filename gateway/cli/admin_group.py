"""``ferry group list``: a topic's consumer groups, their members and lag per partition.

Lag is what the group has still to read in a partition: the partition's
current (last) offset minus the group's stored offset; with nothing stored,
every message the partition holds (Iggy's group poll starts at the first).
The groups, members and partition offsets come from the HTTP API; the stored
group offsets from the Iggy TCP listener (gateway/remote_iggy.py says why).
When those cannot be read the lag shows ``?`` and stderr says why, once.
"""

from __future__ import annotations

import json
import sys
from typing import IO

from ..admin import print_table
from ..remote import RemoteBroker
from ..remote_iggy import GroupOffsets, OffsetsUnavailable
from ..remote_target import Target


def group_rows(client: RemoteBroker, target: Target, stream, topic, base: str) -> list[dict]:
    """One dict per group: id, name, members [{id, partitions}], partitions
    [{partition, current_offset, stored_offset, lag, member}] (None = unknown/none)."""
    topic_info = client.get_topic(stream, topic)
    parts = client.partitions(stream, topic)
    groups = [client.call("GET", f"{base}/{g['id']}") for g in client.call("GET", base)]
    offsets: GroupOffsets | None = None
    why = ""
    if groups and parts:
        try:
            offsets = GroupOffsets(target)
        except OffsetsUnavailable as exc:
            why = str(exc)
    out = []
    try:
        for g in groups:
            owner = {pid: m["id"] for m in g.get("members") or () for pid in m.get("partitions") or ()}
            rows = []
            for pid, part in sorted(parts.items()):
                stored = None
                known = offsets is not None
                if offsets is not None:
                    try:
                        stored = offsets.stored(topic_info.stream_id, topic_info.id, g["id"], pid)
                    except OffsetsUnavailable as exc:  # the connection is no use after this
                        why, known = str(exc), False
                        offsets.close()
                        offsets = None
                current = part.next_offset - 1 if part.next_offset > part.first_offset else None
                if not known:
                    lag = None
                elif stored is None:
                    lag = part.next_offset - part.first_offset
                else:
                    lag = max(part.next_offset - 1 - stored, 0)
                rows.append({"partition": pid, "current_offset": current, "stored_offset": stored,
                             "lag": lag, "member": owner.get(pid)})
            out.append({"id": g["id"], "name": g["name"],
                        "members": [{"id": m["id"], "partitions": m.get("partitions") or []}
                                    for m in g.get("members") or ()],
                        "partitions": rows})
    finally:
        if offsets is not None:
            offsets.close()
    if why:
        print(f"ferry group list: lag unknown: {why}", file=sys.stderr)
    return out


def _cell(value) -> str:
    return "-" if value is None else str(value)


def print_groups(groups: list[dict], as_json: bool, out: IO[str]) -> None:
    if as_json:
        out.write(json.dumps(groups) + "\n")
        return
    rows = []
    for g in groups:
        for r in g["partitions"] or [{"partition": None, "current_offset": None, "stored_offset": None,
                                     "lag": None, "member": None}]:
            lag = "?" if r["lag"] is None and r["partition"] is not None else _cell(r["lag"])
            rows.append([g["id"], g["name"], len(g["members"]), _cell(r["partition"]), _cell(r["current_offset"]),
                         _cell(r["stored_offset"]), lag, _cell(r["member"])])
    print_table(rows, ["ID", "GROUP", "MEMBERS", "PARTITION", "CURRENT", "STORED", "LAG", "MEMBER"], out)


__all__ = ["group_rows", "print_groups"]
