"""A checkpoint write the store refuses for now (scale-out: StorageConflict when another
gateway wrote the replicated metadata at the same moment, or no cluster leader) is tried
again: fault-schedule runs saw the JetStream warm-up log "failed and stopped" on such a
conflict, and that gateway wrote no checkpoint until its restart."""

from __future__ import annotations

import trio

from adapters.nats import driver
from core.errors import StorageConflict, StorageError


class _Saved:
    """SavedState's surface the two loops use: one document due per round."""

    def __init__(self, failures: list[BaseException]) -> None:
        self.failures = failures
        self.written: list[str] = []

    def due(self, streams, now):
        return [("BIG", iter([None, b"doc"]))]

    def stop_steps(self, streams):
        yield None
        yield ("BIG", b"doc")

    def write(self, name, data):
        if self.failures:
            raise self.failures.pop(0)
        self.written.append(name)


class _Streams:
    def __init__(self, saved: _Saved) -> None:
        self.saved = saved

    def warm_step(self, budget: int) -> bool:
        return False   # nothing cold: every round goes straight to the checkpoint


def test_the_warm_up_writes_its_checkpoint_again_after_a_refused_write(monkeypatch):
    monkeypatch.setattr(driver, "WARM_FOLLOW_S", 0.01)   # the pause between two rounds
    saved = _Saved([StorageConflict("the metadata changed on another gateway at the same moment"),
                    StorageError("JetStream did not answer (no leader, or not enabled)")])

    async def main():
        async with trio.open_nursery() as nursery:
            nursery.start_soon(driver.warm_streams, _Streams(saved))
            with trio.fail_after(30):   # a hang fails the test; the rounds take ~0.03 s
                while not saved.written:
                    await trio.sleep(0.01)
            nursery.cancel_scope.cancel()
    trio.run(main)
    assert saved.failures == [] and saved.written[:1] == ["BIG"]   # the third round wrote it


def test_the_save_at_a_stop_writes_a_document_again_after_a_conflict():
    saved = _Saved([StorageConflict("the metadata changed on another gateway at the same moment")])
    trio.run(driver.save_streams, _Streams(saved))
    assert saved.written == ["BIG"]
