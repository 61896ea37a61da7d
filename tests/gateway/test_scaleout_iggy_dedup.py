"""Scale-out: Iggy's message deduplication across the gateways of one store (docs/iggy.md
"Message deduplication", docs/scale-out.md "Iggy message ids across gateways").

Two gateways share the store pass's 3-node nats-server cluster (one store prefix). With
deduplication on, apache-iggy 0.9.0 sends a batch with ids through gateway A, A stops, and
the client resends the batch through B: it is stored once, although B's own window never
saw those ids (B built it before A's send). Past the deduplication expiry the same ids
are stored again, as the reference server forgets an id after its expiry: the cluster's
window is the expiry, not its own two minutes. A batch without ids is stored every time,
and with deduplication off the store's behaviour is unchanged.

Runs only in the store pass (FERRY_TEST_STORE=jetstream, `make test`'s second run)."""

from __future__ import annotations

import asyncio
import time
from contextlib import ExitStack
from pathlib import Path

import pytest
from ferry_harness import TEST_STORE, running_gateway, shared_cluster, store_env
from iggy_clients import run_scenario

nats = pytest.importorskip("nats")

pytestmark = [pytest.mark.store, pytest.mark.slow,
              pytest.mark.skipif(TEST_STORE != "jetstream", reason="two gateways need the JetStream store pass")]
CLIENT = "apache-iggy==0.9.0"
SCRIPT = "current_dedup_scaleout.py"
EXPIRY_S = 3  # the gateways' deduplication expiry: short, so the test can wait past it
WAIT_S = 30   # guards a hang only
IDS = [[i, f"k{i}"] for i in range(101, 121)]


def _run(gw, mode: str, topic: str) -> list[dict]:
    return run_scenario(CLIENT, SCRIPT, gw.ports["iggy_tcp"], mode, topic)


def _stored(gw, topic: str, want: int) -> list[list]:
    """Every stored (id, payload) of the topic's partition 0 through ``gw``, once it holds ``want``
    (another gateway's records reach this one through its mirror)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        got = _run(gw, "stored", topic)[-1]["messages"]
        if len(got) >= want or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


async def _cluster_view(url: str, prefix: str) -> list[tuple[float, list[str]]]:
    """(duplicate_window s, every Nats-Msg-Id) of the store's partition streams, read from the cluster."""
    nc = await nats.connect(url.split(","))
    try:
        js = nc.jetstream()
        out = []
        for info in await js.streams_info():
            if info.config.name.startswith(f"{prefix.upper()}_P_"):
                ids = [(await js.get_msg(info.config.name, seq)).headers.get("Nats-Msg-Id")
                       for seq in range(info.state.first_seq, info.state.last_seq + 1)]
                out.append((info.config.duplicate_window, ids))
        return out
    finally:
        await nc.close()


def _gateways(tmp_path: Path, env: dict, *names: str):
    stack = ExitStack()
    gws = []
    for name in names:
        (tmp_path / name).mkdir(exist_ok=True)
        gws.append(stack.enter_context(running_gateway(tmp_path / name, **env)))
    return stack, gws


def test_a_batch_resent_through_another_gateway_is_stored_once_within_the_expiry(tmp_path):
    env = store_env() | {"FERRY_IGGY_MESSAGE_DEDUPLICATION": "true",
                         "FERRY_IGGY_DEDUPLICATION_EXPIRY_SECONDS": str(EXPIRY_S)}
    stack_b, (b,) = _gateways(tmp_path, env, "b")
    with stack_b:
        _run(b, "noids", "t")  # B's window of the partition is built now, before A's send
        with running_gateway(tmp_path / "a", **env) if (tmp_path / "a").mkdir() is None else None as a:
            _run(a, "ids", "t")
        # A is stopped: the client resends the batch through B, whose window never saw it
        _run(b, "ids", "t")
        assert _stored(b, "t", 25)[5:] == IDS
        time.sleep(EXPIRY_S + 1.5)  # past the expiry, on every gateway and in the cluster
        _run(b, "ids", "t")
        _run(b, "noids", "t")
        stored = _stored(b, "t", 50)
        assert stored[5:25] == IDS and stored[25:45] == IDS  # stored again: forgotten after the expiry
        assert [p for _i, p in stored[:5] + stored[45:]] == [f"n{i}" for i in range(5)] * 2  # no ids: always stored
        windows = asyncio.run(_cluster_view(shared_cluster().url, env["FERRY_STORE_PREFIX"]))
    [(window, msg_ids)] = windows
    assert window == EXPIRY_S  # the partition stream remembers ids for the deduplication expiry
    assert msg_ids[5:25] == [f"iggy.{i:032x}" for i in range(101, 121)]


def test_with_deduplication_off_the_cluster_ids_are_unchanged(tmp_path):
    env = store_env()
    stack_b, (b,) = _gateways(tmp_path, env, "b")
    with stack_b:
        _run(b, "noids", "t")
        with running_gateway(tmp_path / "a", **env) if (tmp_path / "a").mkdir() is None else None as a:
            _run(a, "ids", "t")
        _run(b, "ids", "t")
        stored = _stored(b, "t", 25)
        windows = asyncio.run(_cluster_view(shared_cluster().url, env["FERRY_STORE_PREFIX"]))
    [(window, msg_ids)] = windows
    assert window == 120  # the store's own window (layout.DUPLICATE_WINDOW_NS)
    assert msg_ids[5:25] == [f"{i:032x}" for i in range(101, 121)]  # Ferry's message id, as before
    # The message id is the Iggy id, so the cluster still drops a resend within its two
    # minutes with deduplication off (docs/scale-out.md): stored once, as before.
    assert stored[5:] == IDS
