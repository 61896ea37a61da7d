"""The current Iggy client over HTTP: apache-iggy 0.9.0's HTTP transport against Ferry's
HTTP listener behaves as the same client over TCP (docs/http.md, "The current client").

One scenario program (tests/iggy/clients/current_transports.py: streams, topics,
partitions, send and poll, consumer offsets, consumer groups, users, stats, purges)
runs with the real client over TCP and over HTTP, against a fresh gateway each; the
JSON lines must be the same, error texts aside (each transport words them itself).
Then the middle generation's HTTP transports (apache-iggy 0.7.0, 0.8.0), which are
the other real clients of this API: they number from 0 too.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from ferry_harness import running_gateway
from iggy_clients import run_scenario

# store: also run with every gateway on a JetStream cluster (make test, docs/scale-out.md "Tests")
pytestmark = pytest.mark.store


def steps(lines: list[dict]) -> dict:
    """Step -> what it printed, without the client's own error texts."""
    return {line["step"]: {k: v for k, v in line.items() if k not in ("step", "text")} for line in lines}


@pytest.fixture(scope="module")
def both(tmp_path_factory) -> tuple[dict, dict, list[dict]]:
    """The scenario over TCP and over HTTP, side by side (one gateway each), run once."""
    tmp_path = tmp_path_factory.mktemp("transports")
    (tmp_path / "tcp").mkdir()
    (tmp_path / "http").mkdir()
    with running_gateway(tmp_path / "tcp") as tcp_gw, running_gateway(tmp_path / "http") as http_gw, \
            ThreadPoolExecutor(2) as pool:
        tcp = pool.submit(run_scenario, "apache-iggy==0.9.0", "current_transports.py", tcp_gw.ports["iggy_tcp"], "tcp")
        http = pool.submit(run_scenario, "apache-iggy==0.9.0", "current_transports.py", http_gw.ports["http"], "http")
        tcp_lines, http_lines = tcp.result(), http.result()
    return steps(tcp_lines), steps(http_lines), http_lines


def test_the_same_program_gives_the_same_results_over_tcp_and_http(both):
    tcp, http, http_lines = both
    assert list(http) == list(tcp)  # every step ran on both, in the same order
    for step in tcp:
        assert http[step] == tcp[step], step
    # ... and what they agree on is the current server's behaviour: ids from 0 everywhere
    assert http["get_stream"] == {"id": 0, "name": "orders", "topics": 0}
    assert http["streams"] == {"got": [[0, "orders"], [1, "audit"]]}
    assert http["get_topic"]["id"] == 0 and http["get_topic"]["partition_ids"] == [0, 1]
    assert http["added_partitions"]["partition_ids"] == [0, 1, 2, 3]
    assert http["deleted_partitions"]["partition_ids"] == [0, 1, 2]
    assert http["send"] == {"confirmations": [[0, 0]]}
    assert http["poll_offset"] == {"got": [[0, "68656c6c6f", 0, 5], [1, "0001", 0, 2]]}
    assert http["message_ids"] == {"first": 42, "minted": True}
    assert http["headers"] == {"got": {"n": 7, "ok": True, "trace": "abc"}, "none": True}
    assert http["poll_default_partition"] == {"got": [0, 1]}  # no partition_id: partition 0
    assert http["next3"] == {"got": []} and http["next_p2_again"] == {"got": [[1, "p2b"]]}
    assert http["get_group"] == {"id": 0, "name": "g1", "partitions": 3, "members": 0}
    assert http["root"]["id"] == 0 and http["create_user"] == {"id": 1, "username": "alice", "streams": [0]}
    assert http["topic_options"]["explicit"] == {"segment_size": "2097152"}
    assert http["topic_options"]["derived"]["message_expiry"] == str(2**64 - 1)
    assert http["stats"] == {"streams": 2, "topics": 2, "partitions": 4, "messages": 6, "groups": 1}
    failed = {step for step, got in http.items() if got.get("error")}
    assert failed == {"bad_login", "dup_stream", "unknown_option", "bad_option_value", "small_size_cap",
                      "send_missing_partition", "poll_missing_topic",
                      "poll_missing_partition", "dup_group", "delete_missing_group", "dup_user",
                      "alice_create_stream", "alice_wrong_password", "old_password", "delete_missing_stream",
                      "after_logout"}
    texts = {line["step"]: line.get("text", "") for line in http_lines}
    assert "partition_not_found" in texts["send_missing_partition"]  # Ferry's error JSON reached the client


def test_update_topic_with_the_optional_settings_left_out(both):
    """update_topic(name) alone keeps expiry, size cap and compression (the current server's
    UpdateTopic has them as Options); one given changes only that one."""
    _tcp, http, _lines = both
    assert http["update_name_only"] == {"id": 1, "name": "shipped2", "partitions": 1, "partition_ids": [0],
                                        "messages": 0, "expiry": 7200.0, "max_size": 2_000_000_000,
                                        "compression": "none"}
    assert http["update_compression_only"] == {**http["update_name_only"], "compression": "gzip"}
    assert http["update_expiry_and_size"] == {**http["update_compression_only"], "expiry": "NeverExpire",
                                              "max_size": "Unlimited"}


@pytest.mark.parametrize("version", ["0.7.0", "0.8.0"])
def test_middle_generation_http_transports_number_from_0_too(tmp_path, version):
    with running_gateway(tmp_path) as gw:
        got = steps(run_scenario(f"apache-iggy=={version}", "middle_http.py", gw.ports["http"]))
    assert got == {"get_stream": {"id": 0, "name": "orders"}, "get_topic": {"id": 0, "partitions": 2},
                   "poll_p1": {"got": [[0, "hi"], [1, "there"]]}, "poll_p0": {"got": []}}


