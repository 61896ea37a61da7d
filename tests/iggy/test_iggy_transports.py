"""One program, four transports: apache-iggy 0.9.0 over TCP, QUIC, WebSocket and HTTP.

The scenario (tests/iggy/clients/current_transports.py: streams, topics with options,
partitions, send and poll with headers, consumer offsets and groups, users and
permissions, PATs' owner login, stats, purges and deletes) runs with the real client
over each transport Ferry serves, against a fresh gateway each, in parallel; every
step must print the same result on all four, the client's own error texts aside
(each transport words them itself). tests/http/test_http_current_client.py pins what
those results are (the current server's behaviour).
"""

from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor

import pytest

from ferry_harness import running_gateway
from iggy_clients import run_scenario

# transport -> the listener it talks to
TRANSPORTS = {"tcp": "iggy_tcp", "quic": "iggy_quic", "ws": "iggy_ws", "http": "http"}


def steps(lines: list[dict]) -> dict:
    """Step -> what it printed, without the client's own error texts."""
    return {line["step"]: {k: v for k, v in line.items() if k not in ("step", "text")} for line in lines}


def test_the_same_program_gives_the_same_results_on_every_transport(tmp_path):
    results: dict[str, dict] = {}
    with contextlib.ExitStack() as stack, ThreadPoolExecutor(len(TRANSPORTS)) as pool:
        ports = {}
        for transport, listener in TRANSPORTS.items():
            (tmp_path / transport).mkdir()
            ports[transport] = stack.enter_context(running_gateway(tmp_path / transport)).ports[listener]
        futures = {t: pool.submit(run_scenario, "apache-iggy==0.9.0", "current_transports.py", ports[t], t)
                   for t in TRANSPORTS}
        for t, fut in futures.items():
            results[t] = steps(fut.result())
    tcp = results["tcp"]
    assert len(tcp) > 40
    for transport in ("quic", "ws", "http"):
        got = results[transport]
        assert list(got) == list(tcp), transport
        for step in tcp:
            assert got[step] == tcp[step], (transport, step)
