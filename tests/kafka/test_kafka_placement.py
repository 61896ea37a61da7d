"""Brokers, partition leaders and group coordinators from the live gateways
(adapters/kafka/placement.py); the group API's NOT_COORDINATOR answers, the data
plane's NOT_LEADER_OR_FOLLOWER and its fetch above a lagging copy; the peers' source,
the FERRY_GROUPS lease keys (gateway/jetstream_store/groups.py)."""

from __future__ import annotations

import json
from collections import Counter
from time import time_ns

import trio

from adapters.kafka.errors import ErrorCode as E
from adapters.kafka.group_api import GroupApi
from adapters.kafka.groups import Coordinator
from adapters.kafka.messages import FETCH, METADATA
from adapters.kafka.messages_groups import (DESCRIBE_GROUPS, FIND_COORDINATOR, HEARTBEAT, JOIN_GROUP, LIST_GROUPS,
                                            OFFSET_COMMIT, OFFSET_FETCH)
from adapters.kafka.placement import SINGLE_NODE_ID, Placement, node_id_of, topic_key
from adapters.nats.client_codec import ServerMsg
from gateway.jetstream_store.groups import LEASE_S, GroupCoordinator
from gateway.jetstream_store.layout import Layout
from test_kafka_session import Client, batch, broker, ctx, fetch_req, produce  # noqa: F401 - fixtures

PEERS = (("aaaa01", "gw-a", 9092), ("bbbb02", "gw-b", 10092), ("cccc03", "gw-c", 11092))
KEYS = [(f"topic-{t}", p) for t in range(20) for p in range(10)]
GROUPS = [f"group-{i}" for i in range(200)]


def view(me: int, peers=PEERS) -> Placement:
    """The placement gateway ``peers[me]`` computes (its own entry first, as Store.peers)."""
    return Placement((peers[me], *peers[:me], *peers[me + 1:]), host="ignored", port=1)


def test_every_gateway_computes_the_same_answers():
    views = [view(i) for i in range(len(PEERS))]
    for topic, pid in KEYS:
        assert len({v.leader(topic, pid) for v in views}) == 1
        assert sum(v.leads(topic, pid) for v in views) == 1  # exactly one gateway leads it
    for gid in GROUPS:
        assert len({v.coordinator(gid) for v in views}) == 1
        assert sum(v.coordinates(gid) for v in views) == 1
    assert len({v.brokers() for v in views}) == 1
    assert [b.node_id for b in views[0].brokers()] == sorted(node_id_of(g) for g, _h, _p in PEERS)
    assert {(b.host, b.port) for b in views[0].brokers()} == {(h, p) for _g, h, p in PEERS}


def test_node_ids_are_stable_non_negative_int32s():
    assert node_id_of("aaaa01") == node_id_of("aaaa01")
    ids = {node_id_of(f"{i:012x}") for i in range(1000)}
    assert len(ids) == 1000 and all(0 <= i <= 0x7FFF_FFFF for i in ids)


def test_the_load_spreads_over_every_gateway():
    leaders = Counter(view(0).leader(t, p).host for t, p in KEYS)
    assert set(leaders) == {"gw-a", "gw-b", "gw-c"} and min(leaders.values()) > len(KEYS) // 6
    coordinators = Counter(view(0).coordinator(g).host for g in GROUPS)
    assert set(coordinators) == {"gw-a", "gw-b", "gw-c"}


def test_a_gateway_leaving_moves_only_its_share():
    before, after = view(0), view(0, PEERS[:2])  # gw-c's lease expired
    for topic, pid in KEYS:
        old, new = before.leader(topic, pid), after.leader(topic, pid)
        assert new == old or old.host == "gw-c"
        assert new.host != "gw-c"
    for gid in GROUPS:
        old, new = before.coordinator(gid), after.coordinator(gid)
        assert new == old or old.host == "gw-c"


def test_no_peers_is_the_single_node_of_the_embedded_store():
    p = Placement((), host="127.0.0.1", port=9092)
    assert p.single and p.me.node_id == SINGLE_NODE_ID == 1
    assert [(b.node_id, b.host, b.port) for b in p.brokers()] == [(1, "127.0.0.1", 9092)]
    assert all(p.leads(t, i) for t, i in KEYS) and all(p.coordinates(g) for g in GROUPS)
    assert p.leader("x", 0) is p.me and p.coordinator("g") is p.me


# -- the group API with a placement: NOT_COORDINATOR where another gateway coordinates ------------
class _Offsets:
    """Committed offsets of two groups, one coordinated here and one not."""

    def __init__(self, names):
        self.names = names

    def groups(self):
        return list(self.names)

    def has(self, gid):
        return True

    def fetch(self, gid, lookups):
        return {}


class _Topics:
    ctx = None

    def readable(self, topic):
        return 0

    def partitions(self, topic):
        return 4


def _groups_split(p: Placement) -> tuple[str, str]:
    mine = next(g for g in GROUPS if p.coordinates(g))
    theirs = next(g for g in GROUPS if not p.coordinates(g))
    return mine, theirs


def _call(api, spec, version, **fields):
    body = spec.request.make(**fields)
    value, _done = api.handle(spec.key, version, body, now_ms=0, token=None, client_id="c", topics=_Topics())
    return value


def test_group_requests_for_another_gateways_group_answer_not_coordinator():
    p = view(0)
    mine, theirs = _groups_split(p)
    api = GroupApi(Coordinator(initial_rebalance_delay_ms=0), _Offsets((mine, theirs)), (1, "x", 1), placement=lambda: p)
    join = _call(api, JOIN_GROUP, 7, group_id=theirs, session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
                 member_id="", protocol_type="consumer", protocols=())
    assert join.error_code == E.NOT_COORDINATOR and join.generation_id == -1
    assert _call(api, HEARTBEAT, 4, group_id=theirs, generation_id=1, member_id="m").error_code == E.NOT_COORDINATOR
    part = OFFSET_COMMIT.request.structs["OffsetCommitRequestPartition"]
    topic = OFFSET_COMMIT.request.structs["OffsetCommitRequestTopic"]
    commit = _call(api, OFFSET_COMMIT, 8, group_id=theirs, generation_id_or_member_epoch=-1, member_id="",
                   topics=(topic.make(name="t", partitions=(part.make(partition_index=0, committed_offset=5,
                                                                      committed_metadata=""),)),))
    assert [p.error_code for t in commit.topics for p in t.partitions] == [E.NOT_COORDINATOR]
    assert _call(api, OFFSET_FETCH, 7, group_id=theirs, topics=None).error_code == E.NOT_COORDINATOR
    assert _call(api, OFFSET_FETCH, 7, group_id=mine, topics=None).error_code == 0
    described = _call(api, DESCRIBE_GROUPS, 5, groups=(mine, theirs))
    assert [g.error_code for g in described.groups] == [0, E.NOT_COORDINATOR]
    listed = _call(api, LIST_GROUPS, 4)
    assert [g.group_id for g in listed.groups] == [mine]  # Kafka's admin clients ask every broker
    found = _call(api, FIND_COORDINATOR, 4, key_type=0, coordinator_keys=(mine, theirs))
    assert [(c.host, c.node_id) for c in found.coordinators] == [
        (p.coordinator(g).host, p.coordinator(g).node_id) for g in (mine, theirs)]
    assert found.coordinators[0].host == "gw-a" and found.coordinators[1].host != "gw-a"
    txn = _call(api, FIND_COORDINATOR, 4, key_type=1, coordinator_keys=("tx",))
    assert txn.coordinators[0].host == "gw-a"  # transactional ids: the gateway asked


# -- the data plane with peers: leadership and the fetch above a lagging copy ----------------------
def test_partitions_another_gateway_leads_answer_not_leader_and_a_lagging_copy_answers_empty(
        ctx, broker, monkeypatch):
    monkeypatch.setattr(broker.store, "peers", lambda listener: PEERS)  # this gateway is gw-a
    ends = {}  # what Store.log_end answers per partition (None: not known yet)
    monkeypatch.setattr(broker.store, "log_end", lambda key, part: ends.get(key[2], part.next_offset))
    c = Client(ctx)
    c.login()
    broker.create_stream("s")
    key = topic_key(broker.create_topic("s", "t", 8))
    placement = ctx.placement()
    assert ctx.node_id == node_id_of("aaaa01") and not placement.single
    mine = [p for p in range(8) if placement.leads(key, p)]
    theirs = [p for p in range(8) if not placement.leads(key, p)]
    assert mine and theirs  # the gateway ids are fixed, so is this split
    meta = c.call(METADATA, 12, topics=(METADATA.request.structs["MetadataRequestTopic"].make(name="s.t"),),
                  allow_auto_topic_creation=False)
    assert {b.node_id for b in meta.brokers} == {node_id_of(g) for g, _h, _p in PEERS}
    assert {p.partition_index: p.leader_id for p in meta.topics[0].partitions} == {
        p: placement.leader(key, p).node_id for p in range(8)}
    refused = produce(c, "s.t", batch(b"x"), partition=theirs[0])
    assert refused.error_code == E.NOT_LEADER_OR_FOLLOWER
    assert c.call(FETCH, 12, **fetch_req("s.t", 0, theirs[0])).responses[0].partitions[0].error_code == \
        E.NOT_LEADER_OR_FOLLOWER
    p = mine[0]
    # A leader new to the partition first asks the stored log's end and takes nothing until
    # its copy holds it (adapters/kafka/catch_up.py): retriable, then taken.
    assert produce(c, "s.t", batch(b"a", b"b"), partition=p).error_code == E.NOT_ENOUGH_REPLICAS
    assert produce(c, "s.t", batch(b"a", b"b"), partition=p).error_code == 0
    # Above the copy's high watermark (2): empty while the stored log may hold it (Kafka's answer
    # between the high watermark and the log end), out of range past the log end.
    for end, offset, code in ((None, 5, 0), (6, 5, 0), (4, 5, E.OFFSET_OUT_OF_RANGE), (2, 3, E.OFFSET_OUT_OF_RANGE)):
        ends[p] = end
        part = c.call(FETCH, 12, **fetch_req("s.t", offset, p)).responses[0].partitions[0]
        assert (part.error_code, part.high_watermark, part.records) == (code, 2, b""), (end, offset)


# -- where the peers come from: the FERRY_GROUPS lease keys (gateway/jetstream_store/groups.py) --------
def test_lease_keys_carry_the_advertised_addresses_and_peers_go_with_the_lease():
    async def main():
        gc = GroupCoordinator(Layout("T", 1), lambda name, config: None)
        assert gc.peers("kafka") == ()  # not advertised here: no placement (a single node)
        gc.advertise("kafka", "gw-a", 9092)
        now_ns = time_ns()

        def key(gateway: str, doc: dict) -> None:
            gc.receive(1, ServerMsg(f"$KV.{gc.bucket}.{gateway}", 1, None, None, json.dumps(doc).encode()), now_ns)
        key("b1", {"groups": {}, "listeners": {"kafka": ["gw-b", 10092]}})
        key("old", {"groups": {}})  # an older gateway's key: no address, no peer
        key("bad", {"groups": {}, "listeners": {"kafka": ["gw-x", 0]}})  # not a port: skipped
        peers = gc.peers("kafka")
        assert peers == ((gc.me, "gw-a", 9092), ("b1", "gw-b", 10092))
        assert gc.peers("kafka") is peers  # the same tuple until a change (KafkaContext caches on it)
        assert gc.peers("nats") == ()
        gc.heard["b1"] -= LEASE_S + 1  # its lease ran out
        gc._expire()
        assert gc.peers("kafka") == ((gc.me, "gw-a", 9092),)
        # a gateway that stops cleanly deletes its key: gone at once, not after LEASE_S
        key("b2", {"groups": {"1/1/1": [[7, 1]]}, "listeners": {"kafka": ["gw-c", 10093]}})
        assert gc.peers("kafka")[1:] == (("b2", "gw-c", 10093),) and "b2" in gc.entries
        subject, payload, header = GroupCoordinator(Layout("T", 1), lambda name, config: None).withdrawal()
        gc.receive(2, ServerMsg(subject.replace(subject.rsplit(".", 1)[1], "b2"), 1, None, header, payload), now_ns)
        assert gc.peers("kafka") == ((gc.me, "gw-a", 9092),) and "b2" not in gc.entries

    trio.run(main)
