"""Graceful shutdown reaches idle clients with nats-server's lame-duck INFO (nats.md section 1)."""

from __future__ import annotations

import asyncio
import ssl

import nats
import pytest
import trustme

from ferry_harness import GatewayThread, gateway_config

WAIT = 20  # seconds; only guards a hang


def _tls_env(tmp_path):
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    cert.cert_chain_pems[0].write_to_path(str(tmp_path / "s.pem"))
    cert.private_key_pem.write_to_path(str(tmp_path / "s.key"))
    ctx = ssl.create_default_context()
    ca.configure_trust(ctx)
    return {"FERRY_NATS_TLS_CERT": str(tmp_path / "s.pem"), "FERRY_NATS_TLS_KEY": str(tmp_path / "s.key")}, ctx


@pytest.mark.parametrize("scheme", ["nats", "tls", "ws"])
def test_idle_clients_get_ldm_info_on_shutdown(tmp_path, scheme):
    env, ctx = _tls_env(tmp_path) if scheme == "tls" else ({}, None)
    gw = GatewayThread(gateway_config(tmp_path, "", **env)).start()

    async def main():
        ldm = asyncio.Event()

        async def on_ldm():
            ldm.set()
        extra = {"tls": ctx} if ctx else {}
        nc = await nats.connect(gw.url("nats_ws" if scheme == "ws" else "nats", scheme), lame_duck_mode_cb=on_ldm,
                                allow_reconnect=False, **extra)
        await nc.flush()     # from here on the client is idle: the server's reader waits on the socket
        stopping = asyncio.create_task(asyncio.to_thread(gw.stop))
        await asyncio.wait_for(ldm.wait(), WAIT)
        await stopping
        await nc.close()
    try:
        asyncio.run(asyncio.wait_for(main(), 60))
    finally:
        gw.stop()
