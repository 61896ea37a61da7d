"""Iggy permissions in a readable form for ``ferry perm`` and ``ferry user create``.

On the command line::

    --global manage_streams,read_streams      the ten global flags (core/permissions.py)
    --stream orders:read_stream,poll_messages per stream (repeatable)
    --topic  orders/eu:send_messages          per topic (repeatable)

``all`` sets every flag of its level, ``none`` (or an empty list) none. Streams
and topics are named or numbered; names are turned into ids through the
server, since Iggy keys permissions by id (a renamed stream keeps its grants).
The HTTP API's permissions JSON is ``{"global": {flag: bool},
"streams": {"<id>": {flag: bool, "topics": {"<id>": {flag: bool}}}}}``.
"""

from __future__ import annotations

import argparse

from core.permissions import GLOBAL_FLAGS, STREAM_FLAGS, TOPIC_FLAGS

from ..admin import AdminError
from ..remote import RemoteBroker, RemoteError, path_id


def add_perm_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("permissions (comma-separated flags; 'all' or 'none')")
    g.add_argument("--global", dest="global_flags", metavar="FLAGS",
                   help=f"global flags: {', '.join(GLOBAL_FLAGS)}")
    g.add_argument("--stream", dest="stream_flags", action="append", default=[], metavar="STREAM:FLAGS",
                   help=f"flags on one stream (repeatable): {', '.join(STREAM_FLAGS)}")
    g.add_argument("--topic", dest="topic_flags", action="append", default=[], metavar="STREAM/TOPIC:FLAGS",
                   help=f"flags on one topic (repeatable): {', '.join(TOPIC_FLAGS)}")


def perm_has_flags(args) -> bool:
    return args.global_flags is not None or bool(args.stream_flags) or bool(args.topic_flags)


def parse_flags(text: str, known: tuple[str, ...], where: str) -> dict[str, bool]:
    """``"a,b"`` -> ``{flag: bool}`` over ``known``; AdminError naming the bad flag."""
    words = [w.strip().lower().replace("-", "_") for w in text.split(",") if w.strip()]
    if words == ["all"]:
        return dict.fromkeys(known, True)
    if words in ([], ["none"]):
        return dict.fromkeys(known, False)
    for w in words:
        if w not in known:
            raise AdminError(f"{where}: unknown permission {w!r}; expected {', '.join(known)} (or all, none)")
    return {f: f in words for f in known}


def _split(text: str, flag: str) -> tuple[str, str]:
    target, sep, flags = text.rpartition(":")
    if not sep or not target:
        raise AdminError(f"{flag} {text!r}: expected NAME:FLAGS")
    return target, flags


def _id(client: RemoteBroker, path: str, what: str, name: str) -> int:
    try:
        return client.call("GET", path)["id"]
    except RemoteError as exc:
        if exc.status == 404:
            raise AdminError(f"{what} {name!r} not found") from None
        raise


def permissions_body(client: RemoteBroker, args) -> dict:
    """The permissions JSON for ``--global/--stream/--topic`` (stream/topic names resolved to ids)."""
    glob = parse_flags(args.global_flags or "", GLOBAL_FLAGS, "--global")
    streams: dict[str, dict] = {}

    def stream_entry(name: str) -> tuple[str, dict]:
        sid = _id(client, f"/streams/{path_id(_ident(name))}", "stream", name)
        return str(sid), streams.setdefault(str(sid), {**dict.fromkeys(STREAM_FLAGS, False), "topics": None})

    for text in args.stream_flags:
        name, flags = _split(text, "--stream")
        _, entry = stream_entry(name)
        entry.update(parse_flags(flags, STREAM_FLAGS, f"--stream {name}"))
    for text in args.topic_flags:
        address, flags = _split(text, "--topic")
        stream, sep, topic = address.partition("/")
        if not sep or not stream or not topic:
            raise AdminError(f"--topic {text!r}: expected STREAM/TOPIC:FLAGS")
        sid, entry = stream_entry(stream)
        tid = _id(client, f"/streams/{sid}/topics/{path_id(_ident(topic))}", "topic", address)
        entry["topics"] = entry["topics"] or {}
        entry["topics"][str(tid)] = parse_flags(flags, TOPIC_FLAGS, f"--topic {address}")
    return {"global": glob, "streams": streams or None}


def _ident(text: str) -> int | str:
    return int(text) if text.isdigit() else text


def _on(flags: dict | None, known: tuple[str, ...]) -> str:
    names = [f for f in known if (flags or {}).get(f)]
    return ", ".join(names) if names else "(none)"


def describe_permissions(client: RemoteBroker, user: dict) -> str:
    """Readable lines: the user, its global flags, then each stream and topic grant by name."""
    perms = user.get("permissions")
    lines = [f"user {user['username']!r} (id {user['id']}, {user.get('status', 'active')})"]
    if perms is None:
        lines.append("global: (none)" + (" - the root user may do everything" if user["id"] == 0 else ""))
        return "\n".join(lines) + "\n"
    lines.append(f"global: {_on(perms.get('global'), GLOBAL_FLAGS)}")
    names = {}
    if perms.get("streams"):
        try:
            names = {str(s["id"]): s["name"] for s in client.call("GET", "/streams")}
        except RemoteError:  # may not read streams: ids are still exact
            names = {}
    for sid, sp in sorted((perms.get("streams") or {}).items(), key=lambda kv: int(kv[0])):
        label = f"{names[sid]} (id {sid})" if sid in names else f"id {sid}"
        lines.append(f"stream {label}: {_on(sp, STREAM_FLAGS)}")
        topics = {}
        if sp.get("topics") and sid in names:
            try:
                topics = {str(t["id"]): t["name"] for t in client.call("GET", f"/streams/{sid}/topics")}
            except RemoteError:
                topics = {}
        for tid, tp in sorted((sp.get("topics") or {}).items(), key=lambda kv: int(kv[0])):
            tlabel = f"{topics[tid]} (id {tid})" if tid in topics else f"id {tid}"
            lines.append(f"  topic {tlabel}: {_on(tp, TOPIC_FLAGS)}")
    if user["id"] == 0:
        lines.append("(the root user may do everything, whatever its flags)")
    return "\n".join(lines) + "\n"


__all__ = ["add_perm_options", "describe_permissions", "parse_flags", "perm_has_flags", "permissions_body"]
