"""The runner of the Pravega client's own tests (tests/pravega/client_suite/): its pure parts.

The runner itself is opt-in (``make pravega-suite``: it fetches the release's sdist and
starts gateways); here its pieces run on made-up inputs: the read watch that judges every
``SegmentRead`` against the acknowledged appends, the extraction of ``tests/`` from an sdist,
the URI rewrite and the junit rows with the reasons from expected.txt.
"""

from __future__ import annotations

import importlib.util
import io
import sys
import tarfile
import uuid
from pathlib import Path

import core.log.pending as pending
from adapters.pravega import commands as C
from adapters.pravega import session as S
from adapters.pravega.codec import Append, event_frame
from core.broker import Broker, BrokerConfig
from core.log import LogConfig

SUITE = Path(__file__).resolve().parent / "client_suite"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"client_suite_{name}", SUITE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


run_suite = _load("run_suite")
serve_checked = _load("serve_checked")
SEG = "scope/stream/0.#epoch.0"


def test_a_read_within_the_acknowledged_end_passes_and_one_past_it_is_a_violation():
    watch = serve_checked.ReadWatch()
    watch.ack(SEG, 26)
    watch.read(SEG, 0, 26, undurable=26)  # the whole acknowledged event, a second one pending
    watch.ack(SEG, 20)  # an older ack arriving late never moves the end back
    watch.read(SEG, 13, 13, undurable=0, woken=True)
    assert watch.summary()["violations"] == 0
    watch.read(SEG, 26, 1, undurable=0)  # one byte no writer was told is stored
    got = watch.summary()
    assert got["violations"] == 1 and got["reads_checked"] == 3
    assert got["reads_with_undurable_bytes_pending"] == 1 and got["parked_reads_answered"] == 1
    assert {k: got["first_violations"][0][k] for k in ("segment", "offset", "end", "acknowledged_end")} == \
        {"segment": SEG, "offset": 26, "end": 27, "acknowledged_end": 26}


def test_reads_without_a_seen_ack_are_counted_apart_and_empty_reads_are_not_checked():
    watch = serve_checked.ReadWatch()
    watch.read("scope/txn-written/0.#epoch.0", 0, 10, undurable=0)
    watch.read(SEG, 0, 0, undurable=0)
    watch.park(undurable=8)
    watch.park(undurable=0)
    got = watch.summary()
    assert (got["reads_unverified"], got["reads_empty"], got["reads_checked"], got["violations"]) == (1, 1, 0, 0)
    assert (got["parked_reads"], got["parked_with_undurable_bytes_pending"]) == (2, 1)


def test_violations_kept_in_full_are_bounded():
    watch = serve_checked.ReadWatch()
    watch.ack(SEG, 0)
    for i in range(serve_checked.MAX_VIOLATIONS_KEPT + 5):
        watch.read(SEG, i, 1, undurable=0)
    got = watch.summary()
    assert got["violations"] == serve_checked.MAX_VIOLATIONS_KEPT + 5
    assert len(got["first_violations"]) == serve_checked.MAX_VIOLATIONS_KEPT


def _sdist(path: Path, files: dict[str, str]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{run_suite.PACKAGE}-{run_suite.VERSION}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_only_the_tests_and_their_pins_leave_the_sdist_and_the_uri_is_pointed_at_the_gateway(tmp_path):
    uri = run_suite.UPSTREAM_URI
    sdist = _sdist(tmp_path / "p.tar.gz", {
        "tests/a_test.py": f'm = StreamManager("{uri}", False, False)\nn = StreamManager("{uri}")\n',
        "tests/test.py": "print('no uri here')\n",
        "requirements.txt": "pytest==7.4.4\naiounittest==1.4.2\npytest-cov==4.1.0\n",
        "src/lib.rs": "fn main() {}\n",
    })
    tests, pins = run_suite.extract_tests(sdist, tmp_path / "run")
    assert pins == ["pytest==7.4.4", "aiounittest==1.4.2"]
    assert sorted(p.name for p in tests.iterdir()) == ["a_test.py", "test.py"]
    assert not (tmp_path / "run" / "src").exists()
    assert run_suite.point_at(tests, "tcp://127.0.0.1:4567") == {"a_test.py": 2, "test.py": 0}
    text = (tests / "a_test.py").read_text()
    assert uri not in text and text.count("tcp://127.0.0.1:4567") == 2


JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.pravega_reader_test.PravegaReaderTest" name="test_ReadfromTail" time="0.1">
<failure message="AssertionError: 1 != 2">self = ...
&gt;       self.assertEqual(count, 2)
E       AssertionError: 1 != 2 : Two events are expected
</failure></testcase>
<testcase classname="tests.pravega_reader_test.PravegaReaderTest" name="test_largeEvents" time="4.5">
<failure message="ValueError">E   ValueError: Error observed while writing an event</failure></testcase>
<testcase classname="tests.pravega_client_test.PravegaTest" name="test_tags" time="0.2"/>
<testcase classname="tests.pravega_client_test.PravegaTest" name="test_skip" time="0">
<skipped message="not here" type="pytest.skip">not here</skipped></testcase>
</testsuite></testsuites>"""


def test_junit_rows_carry_the_reason_and_expected_failures_become_limits(tmp_path, capsys):
    junit = tmp_path / "r.xml"
    junit.write_text(JUNIT)
    listed = tmp_path / "expected.txt"
    listed.write_text("# comment\npravega_reader_test.py::PravegaReaderTest::test_ReadfromTail a race in the test\n")
    rows = run_suite.results_of(junit, run_suite.read_expected(listed))
    got = {r.name: (r.state, r.note) for r in rows}
    assert got == {
        "pravega_reader_test.py::PravegaReaderTest::test_ReadfromTail":
            ("LIMIT", "a race in the test [AssertionError: 1 != 2 : Two events are expected]"),
        "pravega_reader_test.py::PravegaReaderTest::test_largeEvents":
            ("FAILED", "ValueError: Error observed while writing an event"),
        "pravega_client_test.py::PravegaTest::test_tags": ("PASSED", ""),
        "pravega_client_test.py::PravegaTest::test_skip": ("SKIPPED", "not here"),
    }
    assert run_suite.report(rows, 1, tmp_path / "log") is True  # test_largeEvents is not listed
    out = capsys.readouterr().out
    assert "failed 1, limit 1, passed 1, skipped 1" in out
    assert "failing and not in expected.txt: pravega_reader_test.py::PravegaReaderTest::test_largeEvents" in out


def test_the_listed_failures_name_tests_the_pinned_release_has():
    listed = run_suite.read_expected(run_suite.EXPECTED_FILE)
    assert listed, "expected.txt lists nothing"
    for name, reason in listed.items():
        assert name.count("::") == 2 and name.split("::")[0].endswith("_test.py"), name
        assert len(reason) > 40, f"{name}: say why it cannot pass"




def test_the_watch_sees_a_real_sessions_parked_read_answered_after_the_ack(tmp_path):
    """serve_checked.install on the real segment-store session (no flusher: ``flush()``
    makes the appends durable and fires the acks, as tests/pravega/test_pravega_session.py
    does): the read parks with the events accepted but not durable, and is answered with
    them after the writer's DataAppended; uninstall puts everything back."""
    broker = Broker.open(tmp_path / "data", BrokerConfig(log=LogConfig(fsync="always")))
    broker.create_stream("sc")
    broker.create_topic("sc", "st", 1)
    real_sync, real_send = pending.fdatasync, S.SegmentStoreSession.send
    watch = serve_checked.ReadWatch()
    uninstall = serve_checked.install(watch, 0.001)
    segment, writer = "sc/st/0.#epoch.0", uuid.UUID(int=7)
    data = event_frame(b"one") + event_frame(b"two")
    try:
        assert pending.fdatasync is not real_sync
        session = S.SegmentStoreSession(broker, emit=bytearray().extend, clock_ms=lambda: 1)
        session.handle(C.SetupAppend(request_id=1, writer_id=writer, segment=segment, delegation_token=""))
        session.handle(Append(writer_id=writer, data=data, num_events=2, last_event_number=2, request_id=2))
        park = session.handle(C.ReadSegment(segment=segment, offset=0, suggested_length=1 << 20,
                                            delegation_token="", request_id=3))
        assert isinstance(park, S.Park)
        assert (watch.parks, watch.parks_undurable, watch.acked) == (1, 1, {})
        broker.flush()  # durable: the ack leaves, then the parked read is answered
        assert watch.acked == {segment: len(data)}
        session.read(park.cmd, parked=True)
        got = watch.summary()
        assert (got["reads_checked"], got["parked_reads_answered"], got["violations"]) == (1, 1, 0)
    finally:
        uninstall()
        broker.close()
    assert pending.fdatasync is real_sync and S.SegmentStoreSession.send is real_send
