"""apache-iggy 0.9.0 scenario: GetSnapshotFile (code 11) and DeleteSegments (code 503)
through the client's raw-command API (the wheel has no dedicated methods for them).

python current_snapshot.py PORT; one JSON line per step. The gateway runs with tiny
segments, so the ten sends below fill several."""

import asyncio
import io
import os
import struct
import sys
import zipfile

from apache_iggy import Consumer, IggyClient, PollingStrategy, SendMessage
from scenario import expect_error, out


def name_id(name: str) -> bytes:
    return bytes([2, len(name)]) + name.encode()  # Identifier: kind 2 (string), length, bytes


async def main(port: int) -> None:
    c = IggyClient(f"127.0.0.1:{port}")
    await c.connect()
    await c.login_user("iggy", "iggy")
    await c.create_stream("s")
    await c.create_topic("s", "t", 1)
    for i in range(10):
        await c.send_messages("s", "t", 0, [SendMessage(f"m{i:02d}".ljust(40, "."))])
    # GetSnapshotFile: u8 compression (2 Deflated), u8 count, type codes (4 Test, 6 ServerConfig)
    raw = await c.send_binary_request(11, bytes([2, 2, 4, 6]))
    zf = zipfile.ZipFile(io.BytesIO(raw))
    config = zf.read("server_config.txt").decode()
    out("snapshot", names=zf.namelist(), test=zf.read("test.txt").decode(), config_has_password='"iggy"' in
        config.split('"root_password"')[1][:20])
    await expect_error("snapshot_zstd", c.send_binary_request(11, bytes([4, 1, 4])))
    await expect_error("snapshot_all_and_test", c.send_binary_request(11, bytes([2, 2, 100, 4])))
    before = (await c.get_topic("s", "t")).partitions[0].segments_count
    # DeleteSegments: Id stream, Id topic, u32 partition, u32 segments_count
    body = name_id("s") + name_id("t") + struct.pack("<II", 0, 2)
    reply = await c.send_binary_request(503, body)
    after = (await c.get_topic("s", "t")).partitions[0]
    msgs = await c.poll_messages("s", "t", consumer=Consumer.Single(1), polling_strategy=PollingStrategy.Offset(0),
                                 count=100, auto_commit=False, partition_id=0)
    out("delete_segments", reply=reply.hex(), removed=before - after.segments_count,
        messages=after.messages_count, offsets=[m.offset() for m in msgs])
    await expect_error("delete_segments_missing_partition",
                       c.send_binary_request(503, name_id("s") + name_id("t") + struct.pack("<II", 5, 1)))


asyncio.run(main(int(sys.argv[1])))
sys.stdout.flush()
os._exit(0)  # the SDK's Tokio runtime can abort at interpreter teardown; skip it
