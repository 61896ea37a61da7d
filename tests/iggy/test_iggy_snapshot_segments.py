"""GetSnapshotFile (code 11) and DeleteSegments (code 503) through the session, no sockets:
status codes, the archive's contents, segments removed and reads after."""

from __future__ import annotations

import io
import json
import os
import struct
import zipfile

import pytest

from adapters.iggy import replies as R
from adapters.iggy import snapshot
from adapters.iggy.codec import legacy_request, vsr_request
from adapters.iggy.errors import IggyError
from adapters.iggy.messages import WireMessage
from adapters.iggy.types import ConsumerId, PartitioningValue, Strategy
from core.broker import Broker, BrokerConfig
from core.log import LogConfig
from core.permissions import GlobalPermissions, Permissions, StreamPermissions
from iggy_pair import Client

E = IggyError
ROOT_PASSWORD = "s3cret-root-pw"
SEGMENT_BYTES = 400  # a few 40-byte records per segment: every test has several


@pytest.fixture
def broker(tmp_path):
    b = Broker.open(tmp_path / "data", BrokerConfig(log=LogConfig(segment_bytes=SEGMENT_BYTES, fsync="always"),
                                                    root_password=ROOT_PASSWORD))
    yield b
    b.close()


def root(broker, dialect: int) -> Client:
    c = Client(broker, dialect)
    assert c.login("iggy", ROOT_PASSWORD) == 0
    return c


def user(broker, dialect: int, name: str, perms: Permissions | None) -> Client:
    broker.meta.users.create_user(name, "secret1", permissions=perms)
    c = Client(broker, dialect)
    assert c.login(name, "secret1") == 0
    return c


def fill(c: Client, dialect: int, n: int = 12) -> None:
    """Stream s, topic t (2 partitions); ``n`` sends of one 40-byte message to
    partition 0, each its own batch, so segments roll every few records."""
    c.ok("stream.create", name="s")
    c.ok("topic.create", stream_id="s", partitions_count=2, name="t")
    pid = struct.pack("<I", 1 if dialect == 1 else 0)
    for i in range(n):
        c.ok("message.send", stream_id="s", topic_id="t", partitioning=PartitioningValue(2, pid),
             messages=(WireMessage(0, f"m{i:02d}".encode().ljust(40, b"."), b"", 1_700_000_000_000_000),))


def archive(body: bytes) -> dict[str, bytes]:
    zf = zipfile.ZipFile(io.BytesIO(body))
    assert zf.testzip() is None  # every member's CRC checks
    return {name: zf.read(name) for name in zf.namelist()}


# -- GetSnapshotFile ---------------------------------------------------------------------
@pytest.mark.parametrize("dialect", [1, 2, 3])
def test_snapshot_has_one_plausible_file_per_type(broker, dialect):
    c = root(broker, dialect)
    fill(c, dialect)
    files = archive(c.ok("system.snapshot", compression=2, types=[1, 2, 3, 4, 5, 6]))
    assert sorted(files) == ["filesystem_overview.txt", "process_list.txt", "resource_usage.txt",
                             "server_config.txt", "server_logs.txt", "test.txt"]
    # FilesystemOverview: every segment file of partition 0, with its real size
    part = broker.partition("s", "t", 0)
    overview = files["filesystem_overview.txt"].decode()
    data_dir = broker.data_dir
    logs = sorted(part.path.glob("*.log"))
    assert len(logs) >= 3
    for log_file in logs:
        rel = os.path.relpath(log_file, data_dir)
        line = next(line for line in overview.splitlines() if line.endswith("  " + rel))
        assert int(line.split()[0]) == log_file.stat().st_size
    assert "metadata.sqlite" in overview
    # ProcessList: this process, by pid, from /proc
    procs = files["process_list.txt"].decode().splitlines()
    assert any(line.split()[0] == str(os.getpid()) for line in procs if not line.startswith("#"))
    # ResourceUsage: the process and the broker's totals
    usage = json.loads(files["resource_usage.txt"])
    assert usage["process"]["pid"] == os.getpid() and usage["process"]["cpu_user_seconds"] > 0
    assert usage["process"]["open_fds"] > 0
    assert {k: usage["broker"][k] for k in ("streams", "topics", "partitions", "messages")} == {
        "streams": 1, "topics": 1, "partitions": 2, "messages": 12}
    assert usage["broker"]["segments"] == part.segment_count + 1
    assert files["test.txt"] == b"test\n"  # Iggy's `echo test`
    assert b"without a gateway" in files["server_logs.txt"]
    config = files["server_config.txt"].decode()
    assert ROOT_PASSWORD not in config and snapshot.REDACTED in config
    assert json.loads(config.split("\n", 1)[1])["log"]["segment_bytes"] == SEGMENT_BYTES


@pytest.mark.parametrize("code, method", [(1, zipfile.ZIP_STORED), (2, zipfile.ZIP_DEFLATED),
                                          (3, zipfile.ZIP_BZIP2), (5, zipfile.ZIP_LZMA)])
def test_snapshot_compressions(broker, code, method):
    c = root(broker, 2)
    body = c.ok("system.snapshot", compression=code, types=[4, 6])
    infos = zipfile.ZipFile(io.BytesIO(body)).infolist()
    assert [i.filename for i in infos] == ["test.txt", "server_config.txt"]
    assert {i.compress_type for i in infos} == {method}
    assert archive(body)["test.txt"] == b"test\n"


def test_all_means_every_type_but_test(broker):
    c = root(broker, 3)
    assert sorted(archive(c.ok("system.snapshot", compression=1, types=[100]))) == sorted(
        snapshot.FILE_NAMES[t] for t in snapshot.ALL_TYPES)
    assert "test.txt" not in snapshot.ALL_TYPES
    assert archive(c.ok("system.snapshot", compression=1, types=[])) == {}  # nothing asked, an empty archive
    assert list(archive(c.ok("system.snapshot", compression=1, types=[4, 4]))) == ["test.txt"]


@pytest.mark.parametrize("dialect", [1, 2, 3])
def test_snapshot_status_codes(broker, dialect):
    c = root(broker, dialect)
    for compression, types in [(4, [1]), (6, [1]),  # Zstd, Xz: no zipfile method here
                               (0, [1]), (7, [1]),  # unknown compressions
                               (2, [7]), (2, [0]),  # unknown types
                               (2, [100, 1]), (2, [4, 100])]:  # All with others
        assert c.call("system.snapshot", compression=compression, types=types) == (E.INVALID_COMMAND, b"")
    truncated = b"\x02\x03\x01"  # three types announced, one sent
    frame = vsr_request(2, truncated, code=11, session=c.vsr_session) if dialect == 3 else legacy_request(11, truncated)
    assert c.raw(frame) == (E.INVALID_COMMAND, b"")
    assert Client(broker, dialect).call("system.snapshot", compression=2, types=[4])[0] == E.UNAUTHENTICATED
    nobody = user(broker, dialect, "nobody", None)
    assert nobody.call("system.snapshot", compression=2, types=[4])[0] == E.UNAUTHORIZED
    reader = user(broker, dialect, "streams", Permissions(GlobalPermissions(manage_streams=True, read_users=True)))
    assert reader.call("system.snapshot", compression=2, types=[4])[0] == E.UNAUTHORIZED
    for name, flags in (("reads", {"read_servers": True}), ("manages", {"manage_servers": True})):
        ok = user(broker, dialect, name, Permissions(GlobalPermissions(**flags)))
        assert archive(ok.ok("system.snapshot", compression=2, types=[4])) == {"test.txt": b"test\n"}


def test_a_second_snapshot_at_once_is_9000(broker):
    c = root(broker, 2)
    with snapshot._IN_PROGRESS:  # one is being collected (Iggy's single flight)
        assert c.call("system.snapshot", compression=2, types=[4])[0] == E.SNAPSHOT_FILE_COMPLETION_FAILED
    assert c.call("system.snapshot", compression=2, types=[4])[0] == 0


def test_the_data_dir_walk_is_bounded(broker, monkeypatch):
    c = root(broker, 2)
    fill(c, 2)
    monkeypatch.setattr(snapshot, "MAX_FS_ENTRIES", 5)
    overview = archive(c.ok("system.snapshot", compression=2, types=[1]))["filesystem_overview.txt"].decode()
    listed = [line for line in overview.splitlines() if not line.startswith("#")]
    assert len(listed) == 5
    assert "listing stopped after 5 entries" in overview


def test_one_process_is_one_line_whatever_its_arguments_hold(broker, tmp_path):
    """CI runs `sh -c` scripts whose arguments hold newlines and blank lines; a
    process must still be one line (pid first), and so must an odd file name."""
    import subprocess
    import sys
    script = "import time\n\n   \ntime.sleep(30)  # \t\x1b[31m"
    child = subprocess.Popen([sys.executable, "-c", script])
    try:
        c = root(broker, 2)
        fill(c, 2)
        (broker.data_dir / "odd\nname").write_bytes(b"x")
        files = archive(c.ok("system.snapshot", compression=2, types=[1, 2]))
    finally:
        child.kill()
        child.wait()
    rows = [line for line in files["process_list.txt"].decode().splitlines() if not line.startswith("#")]
    assert all(line.split() and line.split()[0].isdigit() for line in rows)
    mine = [line for line in rows if line.split()[0] == str(child.pid)]
    assert len(mine) == 1 and "import time\\n\\n   \\ntime.sleep(30)  # \\t\\x1b[31m" in mine[0]
    overview = files["filesystem_overview.txt"].decode().splitlines()
    assert any(line.endswith("  odd\\nname") for line in overview)
    assert not any(line == "name" for line in overview)


def test_redaction():
    config = {"auth": {"root_password": "pw", "root_username": "iggy"},
              "listeners": {"http": {"jwt_secret": "xyz", "tls_key": "", "port": 3000},
                            "nats": {"token": "t0k", "password": None, "user": "bob"}}}
    assert snapshot.redact(config) == {
        "auth": {"root_password": snapshot.REDACTED, "root_username": "iggy"},
        "listeners": {"http": {"jwt_secret": snapshot.REDACTED, "tls_key": "", "port": 3000},
                      "nats": {"token": snapshot.REDACTED, "password": None, "user": "bob"}}}
    args = ["ferry", "serve", "--root-password", "pw", "--nats-token=abc", "--port", "1"]
    assert snapshot._redact_args(args) == "ferry serve --root-password <redacted> --nats-token=<redacted> --port 1"


def test_http_style_requests_by_name():
    req = snapshot.request_from_names("Lzma", ["Test", "ServerConfig", "Test"])
    assert req == snapshot.SnapshotRequest("Lzma", ("Test", "ServerConfig"))
    assert snapshot.request_from_names("Stored", ["All"]).types == snapshot.ALL_TYPES
    for compression, types, field, code in [
        ("deflated", ["Test"], "compression", E.INVALID_FORMAT),
        ("Zstd", ["Test"], "compression", E.INVALID_COMMAND),
        ("Stored", "Test", "snapshot_types", E.INVALID_FORMAT),
        ("Stored", ["Test", "Nope"], "snapshot_types[1]", E.INVALID_FORMAT),
        ("Stored", ["All", "Test"], "snapshot_types", E.INVALID_COMMAND),
    ]:
        with pytest.raises(snapshot.SnapshotRefused) as err:
            snapshot.request_from_names(compression, types)
        assert (err.value.field, err.value.code) == (field, code)


# -- DeleteSegments --------------------------------------------------------------------------
def polled_offsets(c: Client, dialect: int, offset: int) -> list[int]:
    """Offsets of the messages a poll of partition 0 from ``offset`` returns."""
    body = c.ok("message.poll", consumer=ConsumerId(1, 9), stream_id="s", topic_id="t", partition_id=0,
                strategy=Strategy(1, offset), count=100)
    prefix, pos = R.POLL_PREFIX.decode(dialect, body, exact=False)
    out = []
    while pos < len(body):
        if dialect == 2:  # 64-byte message header: offset is its fourth u64
            _c, _lo, _hi, off, _ts, _o, hlen, plen, _r = struct.unpack_from("<QQQQQQIIQ", body, pos)
            out.append(off)
            pos += 64 + hlen + plen
        else:  # a 256-byte batch header, then 48-byte frames with offset deltas
            _p, base, _t, _o, length, _c, n = struct.unpack_from("<QQQQQQI", body, pos)
            fpos = pos + 256
            for _ in range(n):
                _c, _lo, _hi, delta, _td, hlen, plen, _r = struct.unpack_from("<QQQIIIIQ", body, fpos)
                out.append(base + delta)
                fpos += 48 + hlen + plen
            pos += length
    assert prefix.count == len(out)
    return out


@pytest.mark.parametrize("dialect", [2, 3])
def test_delete_segments_removes_the_oldest_sealed_ones(broker, dialect):
    c = root(broker, dialect)
    fill(c, dialect)
    part = broker.partition("s", "t", 0)
    bases = [b for b, _n, _s in part.segment_positions()]
    assert len(bases) >= 4
    assert c.ok("segment.delete", stream_id="s", topic_id="t", partition_id=0, segments_count=0) == b""
    assert part.segment_count == len(bases)
    # an empty body in every dialect: VSR op 138 carries no result section (apache/iggy)
    assert c.ok("segment.delete", stream_id="s", topic_id="t", partition_id=0, segments_count=2) == b""
    assert [b for b, _n, _s in part.segment_positions()] == bases[2:]
    assert polled_offsets(c, dialect, 0) == list(range(bases[2], 12))  # below the first: starts there
    assert polled_offsets(c, dialect, bases[3] + 1) == list(range(bases[3] + 1, 12))
    assert [m.payload for m in broker.read_messages("s", "t", 0, bases[2], 1)] == [
        f"m{bases[2]:02d}".encode().ljust(40, b".")]
    # more than there are: every sealed segment, never the active one; offsets go on
    c.ok("segment.delete", stream_id=0, topic_id=0, partition_id=0, segments_count=1000)  # ids, 0-based
    assert part.segment_count == 1 and part.first_offset == bases[-1]
    assert part.next_offset == 12
    assert c.ok("segment.delete", stream_id="s", topic_id="t", partition_id=1, segments_count=5) == b""


@pytest.mark.parametrize("dialect", [2, 3])
def test_delete_segments_keeps_what_a_consumer_has_not_read(broker, dialect):
    c = root(broker, dialect)
    fill(c, dialect)
    part = broker.partition("s", "t", 0)
    bases = [b for b, _n, _s in part.segment_positions()]
    c.ok("consumer_offset.store", consumer=ConsumerId(1, 5), stream_id="s", topic_id="t", partition_id=0,
         offset=bases[1])  # read all of segment 0, one record of segment 1
    c.ok("segment.delete", stream_id="s", topic_id="t", partition_id=0, segments_count=3)
    assert part.first_offset == bases[1]
    stored = R.OFFSET_INFO.decode(dialect, c.ok("consumer_offset.get", consumer=ConsumerId(1, 5), stream_id="s",
                                                topic_id="t", partition_id=0))
    assert stored.stored_offset == bases[1]  # offsets are left as they are


@pytest.mark.parametrize("dialect", [2, 3])
def test_delete_segments_status_codes(broker, dialect):
    c = root(broker, dialect)
    fill(c, dialect, n=2)
    args = dict(stream_id="s", topic_id="t", partition_id=0, segments_count=1)
    by_name = dialect != 3  # dialect 3: the id variants whatever the request named (errors.status_for)
    assert c.call("segment.delete", **{**args, "stream_id": "nope"})[0] == (
        E.STREAM_NAME_NOT_FOUND if by_name else E.STREAM_ID_NOT_FOUND)
    assert c.call("segment.delete", **{**args, "stream_id": 7})[0] == E.STREAM_ID_NOT_FOUND
    assert c.call("segment.delete", **{**args, "topic_id": "nope"})[0] == (
        E.TOPIC_NAME_NOT_FOUND if by_name else E.TOPIC_ID_NOT_FOUND)
    assert c.call("segment.delete", **{**args, "topic_id": 9})[0] == E.TOPIC_ID_NOT_FOUND
    assert c.call("segment.delete", **{**args, "partition_id": 2})[0] == E.PARTITION_NOT_FOUND
    assert Client(broker, dialect).call("segment.delete", **args)[0] == E.UNAUTHENTICATED
    reader = user(broker, dialect, "reader", Permissions(GlobalPermissions(read_streams=True, read_topics=True,
                                                                           poll_messages=True)))
    assert reader.call("segment.delete", **args)[0] == E.UNAUTHORIZED
    sid = broker.get_stream("s").id
    owner = user(broker, dialect, "owner", Permissions(GlobalPermissions(),
                                                       {sid: StreamPermissions(manage_topics=True)}))
    assert owner.call("segment.delete", **args)[0] == 0
    manager = user(broker, dialect, "manager", Permissions(GlobalPermissions(manage_topics=True)))
    assert manager.call("segment.delete", **args)[0] == 0


def test_delete_segments_is_not_a_seed_era_command(broker):
    c = root(broker, 1)
    body = struct.pack("<BBI", 1, 4, 1) + struct.pack("<BBI", 1, 4, 1) + struct.pack("<II", 1, 1)
    assert c.raw(legacy_request(503, body)) == (E.INVALID_COMMAND, b"")
