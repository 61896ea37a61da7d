"""Consumer groups across gateways: membership shared through a JetStream KV bucket with leases.

Theory of operation
-------------------
A consumer group's members are live connections, and in scale-out mode they
are connected to different gateways. Each gateway owns one key of the KV
bucket ``<PREFIX>_GROUPS`` (``$KV.<PREFIX>_GROUPS.<gateway id>``, the gateway
id being random per start) holding its local members of every group, each
with the wall-clock time it joined. It rewrites the key on every local change
and every ``HEARTBEAT_S`` - with compare-and-set on the key's last sequence
(``Nats-Expected-Last-Subject-Sequence``), so two processes that somehow share
an id notice instead of overwriting each other.

Every gateway watches the whole bucket (one mirror, gaps allowed: a KV keeps
one message per key). A key not rewritten for ``LEASE_S`` is a dead gateway:
its members leave, and the groups rebalance. From the live keys each gateway
builds the same ordered member list per group - by join time, then gateway
id, then member id - and hands it to ``Consumers.set_group_members`` (``broker.consumers``); the
assignment rule then gives every gateway the same answer (core/groups.py).
Local members keep their own ids; another gateway's member appears as
``REMOTE_BIT | crc32(gateway:member)`` (a u32 every Iggy dialect can carry;
local client ids are small, so they never meet; two remote members collide
with odds of one in 2**31).

While a change propagates (one round trip, or ``LEASE_S`` after a crash) two
gateways may briefly disagree, so a partition can be polled by two members:
delivery stays at least once, as in the embedded log after a member leaves.

The same key carries the addresses this gateway's listeners advertise
(``"listeners": {"kafka": [host, port]}``, Store.advertise): the live keys
that carry one are the gateways serving that listener (Store.peers), which the
Kafka listener turns into its brokers, partition leaders and group
coordinators (adapters/kafka/placement.py). A key without it (a gateway of an
older version, or one without that listener) is no peer; a peer goes with its
lease.

A gateway that stops cleanly deletes its key (a KV delete marker, ``KV-Operation:
DEL``, as ``nats kv del`` writes) so that the others, and a gateway restarted on
the same store, drop its members and its addresses at once instead of after
``LEASE_S``: otherwise a Kafka client of the restarted gateway is sent to the
stopped one's port for up to seven seconds.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
import zlib
from typing import TYPE_CHECKING, Callable

import trio

from adapters.nats.client_codec import ServerMsg
from adapters.nats.errors import NatsHeaderError
from adapters.nats.headers import HeaderBlock, encode_headers, parse_headers
from core.message import now_us

from .errors import ConnectionLost, SlowCluster
from .layout import ApiError, pub_ack

if TYPE_CHECKING:
    from core.store import StoreEvents

    from .client import TrioNats
    from .layout import Layout

log = logging.getLogger("ferry.groups")

HEARTBEAT_S = 2.0  # how often a gateway rewrites its key (its lease renewal)
LEASE_S = 7.0  # a key older than this is a dead gateway (3 missed heartbeats and some slack)
REMOTE_BIT = 0x8000_0000
# nats kv del's marker (ADR-8): the key's last message, empty, with this header
KV_DELETE = encode_headers(HeaderBlock((("KV-Operation", "DEL"),)))


def remote_member_id(gateway: str, member: int) -> int:
    return REMOTE_BIT | (zlib.crc32(f"{gateway}:{member}".encode()) & 0x7FFF_FFFF)


def order_members(entries: dict[str, dict[str, list]], me: str) -> dict[str, list]:
    """Group key text -> members in the order every gateway uses (module docstring).
    ``entries``: gateway id -> {group key text: [[member id, joined µs], ...]}."""
    joined: dict[str, list[tuple[int, str, int]]] = {}
    for gateway, groups in entries.items():
        for gkey, members in groups.items():
            for member, at in members:
                joined.setdefault(gkey, []).append((int(at), gateway, int(member)))
    return {gkey: [m if g == me else remote_member_id(g, m) for _at, g, m in sorted(rows)]
            for gkey, rows in joined.items()}


def group_key_text(key: tuple[int, int, int]) -> str:
    return "%d.%d.%d" % key


def group_key(text: str) -> tuple[int, int, int]:
    s, t, g = text.split(".")
    return int(s), int(t), int(g)


class GroupCoordinator:
    """One gateway's side of the shared membership (module docstring)."""

    def __init__(self, layout: "Layout", ensure_stream: Callable[[str, dict], None]) -> None:
        self.layout = layout
        self._ensure_stream = ensure_stream  # the store's: create a stream on the blocking connection
        self.nc: "TrioNats | None" = None  # the store's trio connection, once it runs
        self.events: "StoreEvents | None" = None  # the broker's side (core/store.py), once attached
        self.bucket = f"{layout.prefix.upper()}_GROUPS"
        self.stream = f"KV_{self.bucket}"
        self.me = secrets.token_hex(6)
        self.subject = f"$KV.{self.bucket}.{self.me}"
        self.local: dict[str, dict[int, int]] = {}  # group key text -> member id -> joined µs
        self.entries: dict[str, dict[str, list]] = {}  # gateway id -> its groups
        self.heard: dict[str, float] = {}  # gateway id -> trio time its key last came
        self.last_seq = 0  # our key's last stream sequence (compare-and-set)
        self._dirty = trio.Event()
        self._known: set[str] = set()  # group keys handed to the broker
        self.advertised: dict[str, list] = {}  # listener -> [host, port] of this gateway (Store.advertise)
        self.endpoints: dict[str, dict[str, tuple[str, int]]] = {}  # other gateway id -> listener -> address
        self._peers: dict[str, tuple] = {}  # listener -> Store.peers' answer, until the live set changes

    def ensure_bucket(self) -> None:
        """Create the KV bucket (as ``nats kv add`` would) on the blocking connection."""
        config = {"name": self.stream, "subjects": [f"$KV.{self.bucket}.>"], "max_msgs_per_subject": 1,
                  "discard": "new", "allow_rollup_hdrs": True, "deny_delete": True, "allow_direct": True,
                  "num_replicas": self.layout.replicas, "storage": "file", "retention": "limits",
                  "max_age": 0, "max_msgs": -1, "max_bytes": -1}
        self._ensure_stream(self.stream, config)

    # -- local changes (Store.group_changed) ---------------------------------------------
    def changed(self, key: tuple[int, int, int], member_id: int, joined: bool) -> None:
        gkey = group_key_text(key)
        members = self.local.setdefault(gkey, {})
        if joined:
            members.setdefault(member_id, now_us())
        else:
            members.pop(member_id, None)
            if not members:
                del self.local[gkey]
        self.entries[self.me] = self._own()
        self._apply()
        self._dirty.set()

    def advertise(self, listener: str, host: str, port: int) -> None:
        self.advertised[listener] = [host, int(port)]
        self._peers.clear()
        self._dirty.set()

    def peers(self, listener: str) -> tuple:
        """Store.peers: this gateway first (when it advertised ``listener``), then the
        live others that did, by gateway id; one tuple object until a change."""
        cached = self._peers.get(listener)
        if cached is None:
            mine = self.advertised.get(listener)
            if mine is None:
                cached = ()  # not advertised here: no placement to share
            else:
                others = sorted((g, *eps[listener]) for g, eps in self.endpoints.items() if listener in eps)
                cached = ((self.me, mine[0], mine[1]), *others)
            self._peers[listener] = cached
        return cached

    def _set_endpoints(self, gateway: str, found: dict[str, tuple[str, int]] | None) -> None:
        if self.endpoints.get(gateway) != found:
            if found:
                self.endpoints[gateway] = found
            else:
                self.endpoints.pop(gateway, None)
            self._peers.clear()

    def _own(self) -> dict[str, list]:
        return {g: [[m, at] for m, at in members.items()] for g, members in self.local.items()}

    # -- the bucket ---------------------------------------------------------------------
    async def run(self) -> None:
        """Rewrite our key on change and every HEARTBEAT_S; expire silent gateways."""
        while True:
            with trio.move_on_after(HEARTBEAT_S):
                await self._dirty.wait()
            self._dirty = trio.Event()
            self._write()
            self._expire()

    def _write(self) -> None:
        nc = self.nc
        doc = {"groups": self._own(), "at": now_us()}
        if self.advertised:
            doc["listeners"] = self.advertised
        body = json.dumps(doc, separators=(",", ":")).encode()
        header = encode_headers(HeaderBlock((("Nats-Expected-Last-Subject-Sequence", str(self.last_seq)),)))

        def answered(outcome) -> None:
            if isinstance(outcome, ServerMsg):
                try:
                    self.last_seq = pub_ack(outcome.payload)[0]
                except ApiError as exc:
                    log.warning("consumer-group lease write refused: %s", exc)
                    self.last_seq = 0 if exc.err_code else self.last_seq
                    self._dirty.set()
        try:
            nc.request_cb(self.subject, body, header if self.last_seq else None, answered)
        except (ConnectionLost, SlowCluster):
            pass  # the next heartbeat tries again

    def withdrawal(self) -> tuple[str, bytes, bytes]:
        """subject, payload, header of the delete marker a clean stop writes (docstring)."""
        return self.subject, b"", KV_DELETE

    def receive(self, seq: int, msg: ServerMsg, stored_ns: int) -> None:
        """The bucket's mirror: another gateway's (or our own) key was written. A key
        written more than LEASE_S ago (a mirror re-reading the bucket) is a dead
        gateway's: its age, from the cluster's stored time, counts against the lease."""
        gateway = msg.subject.rsplit(".", 1)[-1]
        if gateway == self.me:
            return
        if msg.header is not None and _deleted(msg.header):
            self._forget([gateway])
            return
        age = max(0.0, (time.time_ns() - stored_ns) / 1e9)
        if age > LEASE_S:
            return
        try:
            doc = json.loads(msg.payload)
            groups = {str(k): [[int(m), int(at)] for m, at in v] for k, v in doc["groups"].items()}
        except (ValueError, KeyError, TypeError, AttributeError):
            return  # not ours to understand
        self._set_endpoints(gateway, _endpoints(doc.get("listeners")))
        self.entries[gateway] = groups
        self.heard[gateway] = trio.current_time() - age
        self._apply()

    def _expire(self) -> None:
        now = trio.current_time()
        dead = [g for g, at in self.heard.items() if now - at > LEASE_S]
        for gateway in dead:
            log.info("consumer-group lease of gateway %s expired: its members leave", gateway)
        self._forget(dead)

    def _forget(self, gateways: list[str]) -> None:
        """These gateways are gone (lease expired, or their key deleted at a clean stop)."""
        changed = False
        for gateway in gateways:
            changed |= self.heard.pop(gateway, None) is not None
            changed |= self.entries.pop(gateway, None) is not None
            self._set_endpoints(gateway, None)
        if changed:
            self._apply()

    def _apply(self) -> None:
        events = self.events
        if events is None:
            return
        ordered = order_members(self.entries, self.me)
        for gkey in self._known - set(ordered):
            events.group_members(group_key(gkey), [])
        for gkey, members in ordered.items():
            events.group_members(group_key(gkey), members)
        self._known = set(ordered)


def _deleted(header: bytes) -> bool:
    try:
        return parse_headers(header).get("KV-Operation") in ("DEL", "PURGE")
    except NatsHeaderError:
        return False


def _endpoints(listeners) -> dict[str, tuple[str, int]] | None:
    """A key's ``"listeners"`` as listener -> (host, port); entries that are not a host
    and a port in 1..65535 are skipped (no key, or an older gateway's: none)."""
    if not isinstance(listeners, dict):
        return None
    out = {}
    for name, addr in listeners.items():
        if (isinstance(addr, list) and len(addr) == 2 and isinstance(addr[0], str) and addr[0]
                and isinstance(addr[1], int) and 0 < addr[1] < 65536):
            out[str(name)] = (addr[0], addr[1])
    return out or None


__all__ = ["GroupCoordinator", "LEASE_S", "order_members", "remote_member_id"]
