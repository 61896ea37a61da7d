"""The monitoring port (nats_monitor) read with httpx while nats-py clients run."""

from __future__ import annotations

import asyncio

import httpx
import nats
import pytest

from adapters.nats.monitor import uptime
from ferry_harness import running_gateway



def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


async def settle(nc) -> None:
    """Make every SUB this client queued reach the server before we go on.

    nats-py's flush() writes its PING straight to the transport while a SUB
    from subscribe() still waits in the client's pending list for its flusher
    task, so the first PONG can come back before the server saw the SUB; a
    second flush's PING is written after it (nats/aio/client.py, _send_ping)."""
    await nc.flush()
    await nc.flush()


@pytest.mark.parametrize("secs, text", [(0, "0s"), (59.9, "59s"), (61, "1m1s"), (3600, "1h0m0s"),
                                        (90061, "1d1h1m1s"), (365 * 86400 + 5, "1y0d0h0m5s")])
def test_uptime_uses_nats_server_compact_form(secs, text):
    assert uptime(secs) == text


def test_varz_connz_subsz_healthz_count_what_clients_do(tmp_path):
    with running_gateway(tmp_path) as gw:
        base = f"http://127.0.0.1:{gw.ports['nats_monitor']}"

        async def main():
            async with httpx.AsyncClient(base_url=base) as http:
                a = await nats.connect(gw.url(), name="pub")
                b = await nats.connect(gw.url(), name="sub")
                await b.subscribe("m.*")
                await b.subscribe("m.x")
                await settle(b)
                for _ in range(3):
                    await a.publish("m.x", b"hello")      # 5 payload bytes each
                await a.flush()
                await b.flush()
                varz = (await http.get("/varz")).json()
                assert varz["in_msgs"] == 3 and varz["in_bytes"] == 15
                assert varz["out_msgs"] == 6 and varz["connections"] == 2 and varz["subscriptions"] == 2
                assert varz["server_id"] == a._server_info["server_id"] and varz["port"] == gw.ports["nats"]
                assert varz["max_payload"] == 1024 * 1024 and varz["ping_interval"] == 120 * 10**9
                assert varz["http_port"] == gw.ports["nats_monitor"] and varz["version"].startswith("2.")
                connz = (await http.get("/connz", params={"subs": "1"})).json()
                assert connz["num_connections"] == connz["total"] == 2
                by_name = {c["name"]: c for c in connz["connections"]}
                assert by_name["pub"]["in_msgs"] == 3 and by_name["pub"]["in_bytes"] == 15
                assert by_name["sub"]["subscriptions"] == 2 and by_name["sub"]["out_msgs"] == 6
                assert by_name["sub"]["subscriptions_list"] == ["m.*", "m.x"]
                assert by_name["pub"]["lang"] == "python3" and by_name["pub"]["type"] == "nats"
                page = (await http.get("/connz", params={"limit": "1", "sort": "msgs_from"})).json()
                assert [c["name"] for c in page["connections"]] == ["pub"] and page["total"] == 2
                assert (await http.get("/connz", params={"sort": "bogus"})).status_code == 400
                assert (await http.get("/subsz")).json()["num_subscriptions"] == 2
                assert (await http.get("/healthz")).json() == {"status": "ok"}
                assert (await http.get("/nope")).status_code == 404
                assert (await http.head("/varz")).status_code == 200
                await a.close()
                while (varz := (await http.get("/varz")).json())["connections"] != 1:
                    await asyncio.sleep(0.01)   # the server sees the close a moment later
                # a closed client's counters stay in the totals
                assert varz["in_msgs"] == 3 and varz["connections"] == 1 and varz["total_connections"] == 2
                await b.close()
        run(main())


def test_connz_reports_tls_version_and_authorized_user(tmp_path):
    import ssl

    import trustme
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    cert.cert_chain_pems[0].write_to_path(str(tmp_path / "s.pem"))
    cert.private_key_pem.write_to_path(str(tmp_path / "s.key"))
    ctx = ssl.create_default_context()
    ca.configure_trust(ctx)
    env = {"FERRY_NATS_TLS_CERT": str(tmp_path / "s.pem"), "FERRY_NATS_TLS_KEY": str(tmp_path / "s.key")}
    with running_gateway(tmp_path, **env) as gw:
        async def main():
            nc = await nats.connect(gw.url("nats", "tls"), tls=ctx)   # the root user, iggy
            async with httpx.AsyncClient() as http:
                connz = (await http.get(f"http://127.0.0.1:{gw.ports['nats_monitor']}/connz?auth=1")).json()
            (c,) = connz["connections"]
            assert c["tls_version"].startswith("TLS") and c["tls_cipher_suite"] and c["authorized_user"] == "iggy"
            await nc.close()
        run(main())


def test_nats_counts_reach_the_gateway_prometheus_metrics(tmp_path):
    with running_gateway(tmp_path) as gw:
        async def main():
            nc = await nats.connect(gw.url())
            sub = await nc.subscribe("p")
            await settle(nc)
            await nc.publish("p", b"12345")
            await sub.next_msg(5)
            await nc.flush()
            async with httpx.AsyncClient() as http:
                text = (await http.get(f"http://127.0.0.1:{gw.ports['http']}/metrics")).text
            lines = set(text.splitlines())
            assert 'ferry_connections_open{listener="nats"} 1' in lines
            assert 'ferry_messages_in_total{listener="nats"} 1' in lines
            assert 'ferry_bytes_in_total{listener="nats"} 5' in lines
            assert 'ferry_messages_out_total{listener="nats"} 1' in lines
            await nc.close()
        run(main())


def test_monitoring_never_shows_message_data(tmp_path):
    """docs/security.md "What is public": the monitoring port has no login, so it shows
    counters, connections, subjects and stream names, never a payload or a header value
    (core NATS, stored subjects and JetStream alike), whatever detail is asked for."""
    secret_payload, secret_header = "salary=100k", "hdr-value-7f3a"
    with running_gateway(tmp_path, '[[binding]]\nstream = "secret"\ntopic = "payroll"\ncreate = true\n') as gw:
        base = f"http://127.0.0.1:{gw.ports['nats_monitor']}"

        async def main():
            async with httpx.AsyncClient(base_url=base) as http:
                nc = await nats.connect(gw.url(), name="app")
                await nc.subscribe("secret.>")
                await nc.subscribe("chat.x")
                await settle(nc)
                js = nc.jetstream()
                await js.add_stream(name="ORDERS", subjects=["orders.>"])
                await js.publish("orders.eu", secret_payload.encode(), headers={"X-Secret": secret_header})
                await nc.publish("secret.payroll", secret_payload.encode(), headers={"X-Secret": secret_header})
                await nc.publish("chat.x", secret_payload.encode(), headers={"X-Secret": secret_header})
                await nc.flush()
                detail = {"subs": "detail", "auth": "1", "streams": "1", "consumers": "1", "config": "1",
                          "accounts": "1", "state": "all"}
                for path in ("/", "/varz", "/connz", "/subsz", "/jsz", "/healthz"):
                    r = await http.get(path, params=detail)
                    assert r.status_code == 200, (path, r.status_code)
                    assert secret_payload not in r.text and secret_header not in r.text, path
                await nc.close()
        run(main())
