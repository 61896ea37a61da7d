"""Pravega readers never ahead of the disk (issue 30), with the real client (pravega 0.3.8).

The gateway runs in this process, so the test holds its fdatasync
(tests/support/held_fsync.py): a reader waiting at the tail must get nothing, and
the writer no ack, until the held write is durable; then the writer is
acknowledged and the reader gets the event (docs/pravega.md "What readers see").
"""

from __future__ import annotations

import queue
import threading

import pytest

from held_fsync import HOLD_LIMIT_S, held_fsync, held_gateway  # noqa: F401 - the fixtures
from pravega_clients import SCENARIO_TIMEOUT_S, json_head, start_scenario

pytestmark = pytest.mark.slow


@pytest.fixture
def gw(held_gateway):
    return held_gateway


class Steps:
    """The JSON steps of a running scenario as they come; ``go()`` lets it go on."""

    def __init__(self, proc) -> None:
        self.proc, self.got, self.lines, self.err = proc, {}, queue.Queue(), []
        threading.Thread(target=self._pump, daemon=True).start()
        threading.Thread(target=lambda: self.err.extend(proc.stderr), daemon=True).start()

    def _pump(self) -> None:
        for line in self.proc.stdout:
            if line.startswith("{"):
                self.lines.put(json_head(line))
        self.lines.put(None)

    def until(self, step: str) -> dict:
        while step not in self.got:
            try:
                line = self.lines.get(timeout=SCENARIO_TIMEOUT_S)
            except queue.Empty:
                line = None
            if line is None:
                pytest.fail(f"no {step!r} from the scenario: {self.got}\n{''.join(self.err)[-4000:]}")
            self.got[line.pop("step")] = line
        return self.got[step]

    def go(self) -> None:
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()


def test_a_waiting_reader_gets_an_event_only_after_its_writer_is_acked(gw, held_fsync):  # noqa: F811
    proc = start_scenario("durable.py", str(gw.ports["pravega_controller"]), stdin=True)
    steps = Steps(proc)
    try:
        assert steps.until("first") == {"got": ["first"]}
        steps.until("ready")
        held_fsync.hold()
        steps.go()  # the scenario starts a read at the tail, then writes "held"
        steps.until("written")
        assert held_fsync.entered.wait(HOLD_LIMIT_S), "the gateway never started writing the event"
        steps.go()
        # appended and being written, not durable: no ack, and the reader gets nothing
        assert steps.until("while_held") == {"acked": False, "got": []}
        held_fsync.release()
        steps.go()
        steps.until("acked")  # the scenario awaits the ack first, then the event
        assert steps.until("after") == {"got": ["held"]}
        assert proc.wait(timeout=SCENARIO_TIMEOUT_S) == 0, "".join(steps.err)[-4000:]
    finally:
        held_fsync.release()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
