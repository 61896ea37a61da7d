"""The mixed-protocol crash loop (bench/crash_loop.py, issue 30) as a short suite test.

Two ``kill -9`` cycles of a real ``ferry serve`` while five real clients write and wait for
their acknowledgements: apache-iggy 0.9 (binary TCP), httpx (Iggy's HTTP API), nats-py
``js.publish`` with ``Nats-Msg-Id``, the pravega 0.3.8 writer and an idempotent
confluent-kafka producer, all logged in as the root user. The bench's own ``run`` does the
work (writers, kills, the final read of the data directory through core's ``Broker``);
this test asserts its verdict: every acknowledged message stored, nothing stored that no
writer sent, and on the paths that promise it (JetStream with message ids, Kafka's
idempotent producer, Pravega's writer, and Iggy binary and HTTP with Iggy's message
deduplication on, as here) no duplicate and no reordering. With deduplication off (Iggy's
default) Iggy may store a batch twice when the server dies between storing it and
answering: the bench counts those (bench/crash_loop.py without --iggy-dedup).

A protocol whose client cannot be installed here is left out with a warning that says why
(the pravega wheel exists for CPython 3.10/3.11 only: tests/support/pravega_clients.py).
"""

from __future__ import annotations

import importlib.util
import sys
import warnings
from pathlib import Path

import pytest

import iggy_clients
import pravega_clients

pytestmark = pytest.mark.slow

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import crash_loop  # noqa: E402 - bench/ is not a package

CYCLES = 2
# Short runs after each cycle's first acks: the kills still land mid-traffic (every writer
# has sends in flight all the time); each restart of five clients costs 10-15 s of the suite.
KILL_AFTER = "0.1,0.3"
IN_PROCESS_CLIENTS = {"http": "httpx", "jetstream": "nats", "kafka": "confluent_kafka"}


def _clients() -> tuple[list[str], list[str]]:
    """The protocols to run and the bench's interpreter flags; warns for each one left out."""
    protocols, flags = list(crash_loop.PROTOCOLS), []
    flags += ["--iggy-python", str(iggy_clients.client_python("apache-iggy==0.9.0"))]
    try:
        flags += ["--pravega-python", str(pravega_clients.client_python())]
    except pytest.skip.Exception as why:
        protocols.remove("pravega")
        warnings.warn(f"crash loop without pravega: {why}", stacklevel=2)
    for proto, module in IN_PROCESS_CLIENTS.items():
        if importlib.util.find_spec(module) is None:
            protocols.remove(proto)
            warnings.warn(f"crash loop without {proto}: {module} is not installed", stacklevel=2)
    return protocols, flags


def test_mixed_protocol_crash_loop_loses_nothing(tmp_path, capsys):
    protocols, flags = _clients()
    args = crash_loop.parse_args(["--cycles", str(CYCLES), "--seed", "30", "--kill-after", KILL_AFTER,
                                  "--iggy-dedup", "--protocols", ",".join(protocols), *flags])
    rep = crash_loop.run(args, tmp_path)
    crash_loop.print_report(rep, args)
    table = capsys.readouterr().out
    print(table)  # shown with -s or on a failure
    assert set(rep.results) == set(protocols)
    for proto, res in rep.results.items():
        assert res.acked > 0, f"{proto}: nothing acknowledged\n{table}"
        assert res.lost == 0, f"{proto}: {res.lost} acknowledged messages lost\n{table}"
        assert res.foreign == 0, f"{proto}: stored records no writer sent\n{table}"
        assert res.stored >= res.acked
        if res.no_dup:
            assert res.duplicated == 0, f"{proto}: {res.duplicated} stored twice\n{table}"
            assert res.out_of_order == 0, f"{proto}: {res.out_of_order} out of order\n{table}"
    assert not [ln for ln in rep.server_errors if "Traceback" in ln], rep.server_errors[:5]
    assert rep.ok
