"""apache-iggy 0.9.0 admin scenario: users, permissions, PAT login, listings, errors.

python current_admin.py PORT; one JSON line per step."""

import asyncio
import os
import struct
import sys

from apache_iggy import (
    AutoLogin, GlobalPermissions, IggyClient, Permissions, StreamPermissions, TcpConfig, UserStatus,
)
from scenario import expect_error, logged_in, out


async def main(port: int) -> None:
    addr = f"127.0.0.1:{port}"
    root = await logged_in(IggyClient, addr)
    await root.create_stream("s1")
    await root.create_topic("s1", "t1", 1)
    stats = await root.get_stats()
    out("stats", streams=stats.streams_count, topics=stats.topics_count, partitions=stats.partitions_count)
    # the process figures are the gateway's real ones (core/procstats.py), not zeros
    out("stats_process", pid=stats.process_id == int(sys.argv[2]), rss=1 << 20 < stats.memory_usage <= stats.total_memory,
        available=0 < stats.available_memory <= stats.total_memory,
        cpu=0.0 <= stats.cpu_usage < 100_000 and 0.0 <= stats.total_cpu_usage <= 100.0,
        started=stats.start_time > 1_700_000_000_000_000 and stats.run_time.total_seconds() > 0)
    out("streams", names=[s.name for s in await root.get_streams()])
    out("topics", names=[t.name for t in await root.get_topics("s1")])
    await root.create_partitions("s1", "t1", 2)
    out("partitions", count=(await root.get_topic("s1", "t1")).partitions_count)
    await root.update_stream("s1", "s1b")
    out("renamed", name=(await root.get_stream("s1b")).name)

    perms = Permissions(GlobalPermissions(read_streams=True), {0: StreamPermissions(read_topics=True)})
    alice = await root.create_user("alice", "secret1", UserStatus.Active, perms)
    out("create_user", username=alice.username, id=alice.id)
    got = await root.get_user("alice")
    out("get_user", read_streams=got.permissions.global_permissions.read_streams,
        streams=sorted(got.permissions.streams))
    out("users", names=sorted(u.username for u in await root.get_users()))
    await expect_error("dup_user", root.create_user("alice", "secret1"))

    c = IggyClient(addr)
    await c.connect()
    await c.login_user("alice", "secret1")
    out("alice_streams", names=[s.name for s in await c.get_streams()])
    await expect_error("alice_create_stream", c.create_stream("nope"))

    raw = await root.send_binary_request(42, bytes([7]) + b"ci-toke" + struct.pack("<Q", 0))
    token = raw[1 : 1 + raw[0]].decode()
    p = IggyClient(TcpConfig(server_address=addr, auto_login=AutoLogin.personal_access_token(token)))
    await p.connect()
    out("pat_streams", names=[s.name for s in await p.get_streams()])
    await root.delete_user("alice")
    out("users_after_delete", names=sorted(u.username for u in await root.get_users()))


asyncio.run(main(int(sys.argv[1])))
sys.stdout.flush()
os._exit(0)  # the SDK's Tokio runtime can abort at interpreter teardown; skip it
