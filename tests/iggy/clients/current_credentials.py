"""apache-iggy 0.9.0: what credential changes do to live sessions (docs/iggy.md
"What a credential change does to live sessions").

python current_credentials.py ROOT_TCP_PORT TRANSPORT PORT

The root acts over TCP; the user "alice" acts over TRANSPORT (tcp, quic, http or
ws) on PORT. Its client reconnects as usual (after a short pause, once), so an
ended login (the user deleted) shows as the client's own error from its re-login
(the login it replays: "Invalid credentials"). As on apache/iggy, a deactivation
or a deleted personal access token ends no session; they refuse new logins.
Prints one JSON line per step."""

import asyncio
import os
import struct
import sys
from datetime import timedelta

from apache_iggy import (
    AutoLogin, GlobalPermissions, HttpConfig, IggyClient, Permissions, QuicConfig, QuicReconnectionConfig,
    TcpConfig, TcpReconnectionConfig, UserStatus,
)
from scenario import expect_error, out

READ_USERS = Permissions(GlobalPermissions(read_users=True))
READ_STREAMS = Permissions(GlobalPermissions(read_streams=True))
RETRY = {"max_retries": 1, "interval": timedelta(milliseconds=50), "reestablish_after": timedelta(0)}


async def connected(transport: str, port: int, auto_login=None) -> IggyClient:
    addr = f"127.0.0.1:{port}"
    login = auto_login or AutoLogin.disabled()
    if transport == "quic":  # self-signed localhost cert: the SDK does not verify by default
        c = IggyClient(QuicConfig(server_address=addr, auto_login=login, reconnection=QuicReconnectionConfig(**RETRY)))
    elif transport == "http":
        c = IggyClient(HttpConfig(api_url=f"http://{addr}", retries=0))
    else:
        c = IggyClient(TcpConfig(server_address=addr, auto_login=login, reconnection=TcpReconnectionConfig(**RETRY)))
    await c.connect()
    return c


async def user(transport: str, port: int, name: str, password: str) -> IggyClient:
    if transport == "ws":  # the connection string carries the login (the SDK logs in on connect)
        c = IggyClient.from_connection_string(
            f"iggy+ws://{name}:{password}@127.0.0.1:{port}"
            "?reconnection_retries=1&reconnection_interval=50ms&reestablish_after=1ms")
        await c.connect()
        return c
    c = await connected(transport, port)
    await c.login_user(name, password)
    return c


async def users_of(step: str, c: IggyClient) -> None:
    """``get_users`` (needs read_users): the names, or the client's error."""
    try:
        names = sorted(u.username for u in await c.get_users())
    except RuntimeError as exc:
        out(step, error=str(exc))
    else:
        out(step, names=names)


async def main(root_port: int, transport: str, port: int) -> None:
    root = await user("tcp", root_port, "iggy", "iggy")
    await root.create_stream("s")
    await root.create_user("alice", "secret1", UserStatus.Active, READ_USERS)
    alice = await user(transport, port, "alice", "secret1")
    await users_of("before", alice)

    # Permissions: the live session acts with the new ones on its next request.
    await root.update_permissions("alice", READ_STREAMS)
    await users_of("permissions_revoked", alice)
    out("permissions_granted", streams=[s.name for s in await alice.get_streams()])
    await root.update_permissions("alice", READ_USERS)
    await users_of("permissions_restored", alice)

    # Password: every session keeps going; only the old password stops logging in.
    other = await user(transport, port, "alice", "secret1")
    await alice.change_password("alice", "secret1", "secret2")
    await users_of("password_same_session", alice)
    await users_of("password_other_session", other)
    await expect_error("password_old_login", user(transport, port, "alice", "secret1"))
    await users_of("password_new_login", await user(transport, port, "alice", "secret2"))

    # Personal access token (binary transports; the client logs in with one only
    # through auto-login): deleting it ends no session, not even those that
    # logged in with it; a new login with it is refused.
    if transport in ("tcp", "quic"):
        owner = await user("tcp", root_port, "alice", "secret2")
        raw = await owner.send_binary_request(42, bytes([5]) + b"t-one" + struct.pack("<Q", 0))
        token = raw[1 : 1 + raw[0]].decode()
        by_token = await connected(transport, port, AutoLogin.personal_access_token(token))
        await users_of("token_session", by_token)
        await owner.send_binary_request(43, bytes([5]) + b"t-one")
        await users_of("token_deleted_session", by_token)
        await users_of("token_deleted_password_session", other)
        await expect_error("token_deleted_login", connected(transport, port, AutoLogin.personal_access_token(token)))

    # Deactivation only refuses new logins: the live sessions go on.
    await root.update_user("alice", status=UserStatus.Inactive)
    await users_of("inactive_session", alice)
    await users_of("inactive_other_session", other)
    await expect_error("inactive_login", user(transport, port, "alice", "secret2"))
    await root.update_user("alice", status=UserStatus.Active)
    await users_of("reactivated_session", alice)
    await alice.login_user("alice", "secret2")
    await users_of("reactivated_login", alice)

    # Deletion ends them too (whatever the call), and a new user given the same id
    # is not the old one: a session quiet since before the deletion stays ended.
    quiet = await user(transport, port, "alice", "secret2")
    second = await user(transport, port, "alice", "secret2")
    await root.delete_user("alice")
    await users_of("deleted_session", alice)
    await expect_error("deleted_create_stream", second.create_stream("mine"))
    await expect_error("deleted_login", user(transport, port, "alice", "secret2"))
    again = await root.create_user("alice", "secret3", UserStatus.Active, READ_USERS)
    out("recreated", id=again.id)
    await users_of("recreated_old_session", quiet)
    await users_of("recreated_new_login", await user(transport, port, "alice", "secret3"))
    await users_of("root_unaffected", root)


asyncio.run(main(int(sys.argv[1]), sys.argv[2], int(sys.argv[3])))
sys.stdout.flush()
os._exit(0)  # the SDK's Tokio runtime can abort at interpreter teardown; skip it
