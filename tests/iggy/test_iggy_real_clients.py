"""Scenario tests with the real Iggy clients, each in its own venv (conftest.py).

One gateway per test on 127.0.0.1 port 0; the scenario script prints one
JSON line per step, compared here with what Iggy's own server would answer
(texts of errors are each client's own: Debug form up to 0.8, Display form
in 0.9, protocols/iggy-current.md section 9)."""

from __future__ import annotations

import os

import pytest

from iggy_clients import run_scenario

# store: also run with every gateway on a JetStream cluster (make test, docs/scale-out.md "Tests")
pytestmark = pytest.mark.store


def steps(lines):
    return {line["step"]: {k: v for k, v in line.items() if k != "step"} for line in lines}


COMMON_POLLS = {
    "poll_first": {"got": [0]},
    "poll_last": {"got": [1]},
    "poll_ts": {"got": [0, 1]},
    "poll_next1": {"got": [0]},
    "poll_next2": {"got": [1]},
    "poll_next3": {"got": []},
}


@pytest.mark.parametrize("version", ["0.5.0", "0.6.0", "0.7.0", "0.8.0"])
def test_apache_iggy_middle_generation_scenario(iggy_gateway, version):
    """The four middle releases (iggy-middle.md 2): 0.8.0 and 0.7.0 are dialect 2,
    0.6.0 is 4 (56-byte headers), 0.5.0 is 5 (56-byte headers, 1-based ids)."""
    got = steps(run_scenario(f"apache-iggy=={version}", "middle_basic.py", iggy_gateway.ports["iggy_tcp"]))
    first_id = 1 if version == "0.5.0" else 0
    partition = 0 if version >= "0.7.0" else None  # ReceiveMessage.partition_id() is new in 0.7.0
    assert got == {
        "bad_login": {"error": "InvalidCredentials"},
        "login": {},
        "dup_stream": {"error": 'StreamNameAlreadyExists("")'},
        "get_stream": {"id": first_id, "name": "orders", "topics": 0},
        "missing_stream": {"value": None},
        "get_topic": {"id": first_id, "name": "created", "partitions": 2},
        "poll_offset": {"got": [[0, "68656c6c6f", partition], [1, "0001", partition]]},
        **COMMON_POLLS,
        "poll_p1": {"got": ["7031"]},
        "poll_missing_topic": {"error": 'TopicNameNotFound("", "")'},
        "group_iter": {"got": ["0001", "68656c6c6f", "7031"]},
        "delete_offset_again": {"error": "ConsumerOffsetNotFound(0)"},
    }


@pytest.mark.parametrize("transport", ["tcp", "quic"])
def test_apache_iggy_0_9_0_scenario(iggy_gateway, transport):
    port = iggy_gateway.ports[f"iggy_{transport}"]
    got = steps(run_scenario("apache-iggy==0.9.0", "current_basic.py", port, transport))
    assert got == {
        "bad_login": {"error": "Invalid credentials"},
        "login": {},
        "dup_stream": {"error": "Stream with name:  already exists."},
        "get_stream": {"id": 0, "name": "orders", "topics": 0},
        "missing_stream": {"value": None},
        "get_topic": {"id": 0, "name": "created", "partitions": 2},
        "send": {"confirmations": [[0, 0]]},
        "poll_offset": {"got": [[0, "68656c6c6f", 0], [1, "0001", 0]]},
        "headers": {"got": {"n": 7, "trace": "abc"}},
        **COMMON_POLLS,
        # the current server answers the id variants whatever the request named (test_iggy_error_codes.py)
        "poll_missing_topic": {"error": "Topic with ID: 0 for stream with ID: 0 was not found."},
        "group_iter": {"got": ["0001", "68656c6c6f", "7031"]},
        "delete_offset_again": {"error": "Consumer offset for consumer with ID: 0 was not found."},
        "delete_missing": {"error": "Stream with ID: 0 was not found."},
    }


def test_iggy_py_0_4_0_scenario(iggy_gateway):
    got = steps(run_scenario("iggy-py==0.4.0", "seed_basic.py", iggy_gateway.ports["iggy_tcp"]))
    assert got == {
        "login": {},
        "dup_stream": {"error": 'StreamNameAlreadyExists("")'},
        "get_stream": {"id": 1, "name": "orders", "topics": 0},  # 1-based at this generation's edge
        "missing_stream": {"value": None},
        "get_topic": {"id": 1, "name": "created", "partitions": 2},
        "poll_offset": {"got": [[0, "68656c6c6f", True], [1, "77", True]]},  # CRC32 of the payload
        **COMMON_POLLS,
        "poll_p2": {"got": [0]},
        "poll_missing_topic": {"error": "TopicIdNotFound(0, 0)"},
    }


def test_apache_iggy_0_9_0_admin_scenario(iggy_gateway):
    """Users with permissions, 41 for a user without the grant, PAT auto-login, listings."""
    got = steps(run_scenario("apache-iggy==0.9.0", "current_admin.py", iggy_gateway.ports["iggy_tcp"], str(os.getpid())))
    assert got == {
        "stats": {"streams": 1, "topics": 1, "partitions": 1},
        "stats_process": {"pid": True, "rss": True, "available": True, "cpu": True, "started": True},
        "streams": {"names": ["s1"]},
        "topics": {"names": ["t1"]},
        "partitions": {"count": 3},
        "renamed": {"name": "s1b"},
        "create_user": {"username": "alice", "id": 1},
        "get_user": {"read_streams": True, "streams": [0]},
        "users": {"names": ["alice", "iggy"]},
        "dup_user": {"error": "User already exists"},
        "alice_streams": {"names": ["s1b"]},
        "alice_create_stream": {"error": "Unauthorized"},
        "pat_streams": {"names": ["s1b"]},
        "users_after_delete": {"names": ["iggy"]},
    }


def test_cross_generation_with_real_clients(iggy_gateway):
    """Sent by each generation, polled by each: same payloads in the same order; the
    0.9.0 client's typed headers come back typed to the 0.9.0 poller."""
    port = iggy_gateway.ports["iggy_tcp"]
    specs = ["iggy-py==0.4.0", *(f"apache-iggy=={v}" for v in ("0.5.0", "0.6.0", "0.7.0", "0.8.0", "0.9.0"))]
    run_scenario("apache-iggy==0.9.0", "xgen.py", port, "setup")
    for spec in specs:
        run_scenario(spec, "xgen.py", port, "send")
    expected = ["from-" + spec.replace("==", "-") for spec in specs]
    for spec in specs:
        got = run_scenario(spec, "xgen.py", port, "poll")
        assert [g["payload"] for g in got] == expected, spec
    typed = run_scenario("apache-iggy==0.9.0", "xgen.py", port, "poll")[-1]["headers"]
    assert typed == {"gen": "apache-iggy-0.9.0", "n": 7, "ok": True, "f": 1.5}


def test_apache_iggy_0_9_0_every_header_kind_and_a_typed_key(tmp_path):
    """Lossless typed headers (ARCHITECTURE.md "Headers"): every kind comes back to the 0.9.0
    client as sent, and the stored canonical message holds the same kinds."""
    from core.broker import Broker
    from core.message import HeaderKind
    from ferry_harness import running_gateway

    with running_gateway(tmp_path) as gw:
        got = run_scenario("apache-iggy==0.9.0", "current_headers.py", gw.ports["iggy_tcp"])[0]
    assert got["back"] == got["sent"] and len(got["sent"]) == 16
    with Broker.open(tmp_path / "data") as broker:
        [msg] = broker.read_messages("h", "t", 0, 0, 10)
    kinds = {v.kind for _k, v in msg.headers}
    assert kinds == set(HeaderKind)
    assert any(k.kind == HeaderKind.INT32 for k, _v in msg.headers)  # the typed key survived


def test_apache_iggy_0_9_0_rest_of_the_client_api(iggy_gateway):
    """Every client call the other scenarios leave out, with the real 0.9.0 client:
    consumer groups one call at a time, the high-level producer, purges, topic
    options on update, partition deletes, user updates, password change, logout
    and DescribeOptions."""
    got = steps(run_scenario("apache-iggy==0.9.0", "current_admin2.py", iggy_gateway.ports["iggy_tcp"]))
    never = "HeaderValue.UnsignedInt64(18446744073709551615)"
    assert got == {
        "dup_group": {"error": "Consumer group with name:  for topic with ID: 0 already exists."},
        "group_joined": {"id": 0, "name": "g", "partitions": 3, "members": 1, "member_partitions": [0, 1, 2]},
        "groups": {"names": ["g"]},
        "group_left": {"members": 0},
        "group_deleted": {"value": None},
        "join_missing_group": {"error": "Consumer group with ID: 0 for topic with ID: 0 was not found."},
        "producer": {"p1": ["a", "b", "c"], "p2": ["d"]},
        "producer_created": {"partitions": 2},
        "purged_topic": {"p1": [], "partitions": 3},
        "purged_stream": {"p0": []},
        "updated_topic": {"name": "t-renamed", "partitions": 3, "expiry": 3600.0, "max_size": 50_000_000,
                          "compression": "none"},
        "updated_compression": {"expiry": 3600.0, "compression": "gzip"},  # options not sent keep their values
        "deleted_partitions": {"partitions": 1},
        "delete_too_many_partitions": {"error": "Invalid partitions count"},
        "deleted_topic": {"value": None},
        "updated_user": {"username": "robert", "read_streams": True},
        "inactive_login": {"error": "User inactive"},
        "wrong_current_password": {"error": "Invalid credentials"},
        "after_logout": {"error": "Unauthenticated"},
        "old_password": {"error": "Invalid credentials"},
        "new_password": {"streams": ["s", "s2"]},
        "unknown_option": {"error": "Unsupported option key: "},
        "known_option": {"partitions": 1},
        "describe_options": {"options": {"compression_algorithm": ["string", 'HeaderValue.String("none")'],
                                         "message_expiry": ["uint64", never],
                                         "max_topic_size": ["uint64", never],
                                         "segment_size": ["uint64", "HeaderValue.UnsignedInt64(268435456)"],
                                         "enforce_fsync": ["bool", "HeaderValue.Bool(true)"],
                                         "messages_required_to_save": ["uint32", "HeaderValue.UnsignedInt32(1024)"],
                                         "size_of_messages_required_to_save":
                                             ["uint64", "HeaderValue.UnsignedInt64(1048576)"],
                                         "preallocate_segments": ["bool", "HeaderValue.Bool(false)"]},
                             "described": True},  # the whole catalog: test_iggy_topic_options.py
        "describe_stream_options": {"count": 0},
    }


def test_apache_iggy_0_9_0_snapshot_and_delete_segments(tmp_path):
    """GetSnapshotFile and DeleteSegments through the 0.9.0 client's raw-command API
    (``send_binary_request``; the wheel has no dedicated methods): a real ZIP back,
    its errors as the client's own, and the oldest segments gone with reads intact."""
    from ferry_harness import running_gateway

    with running_gateway(tmp_path, FERRY_LOG_SEGMENT_BYTES="400") as gw:  # several segments for 10 sends
        got = steps(run_scenario("apache-iggy==0.9.0", "current_snapshot.py", gw.ports["iggy_tcp"]))
    assert got["snapshot"] == {"names": ["test.txt", "server_config.txt"], "test": "test\n",
                               "config_has_password": False}
    assert got["snapshot_zstd"] == got["snapshot_all_and_test"] == {"error": "Invalid command"}
    deleted = got["delete_segments"]
    first = 10 - deleted["messages"]
    assert deleted["reply"] == "" and deleted["removed"] == 2  # DeleteSegments replies carry no result section
    assert first > 0 and deleted["offsets"] == list(range(first, 10))
    assert "Partition with ID" in got["delete_segments_missing_partition"]["error"]


@pytest.mark.parametrize("spec", ["iggy-py==0.4.0", "apache-iggy==0.5.0", "apache-iggy==0.6.0",
                                  "apache-iggy==0.7.0", "apache-iggy==0.8.0"])
def test_a_user_without_grants_gets_each_clients_unauthorized(iggy_gateway, spec):
    """Status 41 for every call a grantless user makes (iggy.md 7), raised as the
    client's own ``Unauthorized``; the user and the stream are made over HTTP."""
    import httpx

    with httpx.Client(base_url=f"http://127.0.0.1:{iggy_gateway.ports['http']}", timeout=20) as http:
        token = http.post("/users/login", json={"username": "iggy", "password": "iggy"}).json()
        http.headers["authorization"] = f"Bearer {token['access_token']['token']}"
        assert http.post("/users", json={"username": "alice", "password": "secret1"}).status_code == 200
        assert http.post("/streams", json={"name": "orders"}).status_code == 200
        topic = {"name": "t", "partitions_count": 1, "compression_algorithm": "none", "message_expiry": 0,
                 "max_topic_size": 0, "replication_factor": 1}
        assert http.post("/streams/orders/topics", json=topic).status_code == 200
    got = steps(run_scenario(spec, "unauthorized.py", iggy_gateway.ports["iggy_tcp"], "alice", "secret1"))
    assert got == {step: {"error": "Unauthorized"} for step in ("create_stream", "get_stream", "send", "poll")}
