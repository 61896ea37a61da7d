"""The bodies of ``ferry pub``, ``sub``, ``req`` and ``reply`` (parsers: gateway/cli/nats.py,
the runner: nats_client.py). Each is a coroutine function taking the parsed arguments and
returning an exit code; failures raise :class:`~gateway.cli.nats_client.NatsCliError`.

What they print is natscli's (cli/pub_command.go, sub_command.go,
reply_command.go): stamped status lines on stderr, message bodies on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

from .nats_client import (EXIT_FAILED, NEXT_REPLY_GRACE_S, PUB_LINES_MAX, Connection, NatsCliError,
                          body_block, check_subject, connection_settings, go_duration, header_lines, log,
                          reason, render, render_bytes, wait_or_lost, write_out)

NO_RESPONDERS = "No responders available for request"  # nats.go's ErrNoResponders, capitalised


def read_body(args: argparse.Namespace, quiet: bool) -> bytes:
    if args.body != "-":
        return args.body.encode()
    if not quiet:
        log("Reading payload from STDIN")
    return sys.stdin.buffer.read()


def headers_for(pairs: list[tuple[str, str]], count: int) -> dict[str, str] | None:
    """The -H pairs for message ``count``, templates rendered (natscli renders header
    values too); None when there are none, so nats-py sends a plain PUB."""
    return {k: render(v, count) for k, v in pairs} or None


async def _guarded(conn: Connection, awaitable):
    """Await a nats-py call; its errors (closed connection, payload too big, a
    flush with no PONG) become one line."""
    import nats.errors

    try:
        return await wait_or_lost(conn, awaitable)
    except (nats.errors.Error, asyncio.TimeoutError) as exc:
        conn.check()  # a server -ERR explains a closed connection better
        raise NatsCliError(reason(exc)) from None


# -- pub -----------------------------------------------------------------------
async def pub(args: argparse.Namespace) -> int:
    check_subject(args.subject, wildcards=False)
    settings = connection_settings(args)
    body = read_body(args, args.quiet)
    conn = Connection(settings)
    nc = await conn.open("ferry pub")
    bar = None
    try:
        # natscli prints a line per message up to 20 and a progress bar beyond;
        # flushing each of those few messages makes every line mean "the server has it".
        per_line = args.count <= PUB_LINES_MAX
        if not per_line and not args.quiet and sys.stderr.isatty():
            from tqdm import tqdm

            bar = tqdm(total=args.count, unit="msg", file=sys.stderr, leave=False)
        total = 0
        for i in range(1, args.count + 1):
            data = render_bytes(body, i)
            total += len(data)
            await _guarded(conn, nc.publish(args.subject, data, reply=args.reply or "",
                                            headers=headers_for(args.headers, i)))
            if per_line or args.sleep:
                await _guarded(conn, nc.flush(timeout=settings["timeout"]))
                conn.check()
            if per_line and not args.quiet:
                log(f"Published {len(data)} bytes to {_q(args.subject)}")
            if bar is not None:
                bar.update(1)
            if args.sleep and i < args.count:
                await asyncio.sleep(args.sleep)
        await _guarded(conn, nc.flush(timeout=settings["timeout"]))
        conn.check()
        if bar is not None:
            bar.close()
            bar = None
        if not per_line and not args.quiet:
            log(f"Published {args.count} messages ({total} bytes) to {_q(args.subject)}")
        return 0
    finally:
        if bar is not None:
            bar.close()
        await conn.close()


def _q(text: str) -> str:
    """Go's %q for the plain subjects NATS allows: double quotes, escapes for \\ and "."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


# -- sub -------------------------------------------------------------------------
async def sub(args: argparse.Namespace) -> int:
    check_subject(args.subject, wildcards=True)
    settings = connection_settings(args)
    conn = Connection(settings)
    nc = await conn.open("ferry sub")
    try:
        subscription = await _guarded(conn, nc.subscribe(args.subject, queue=args.queue or "",
                                                         max_msgs=args.count))
        await _guarded(conn, nc.flush(timeout=settings["timeout"]))
        conn.check()  # a subject the server refused comes back as an asynchronous -ERR
        if not args.raw:
            group = f" in queue group {_q(args.queue)}" if args.queue else ""
            log(f"Subscribing on {args.subject}{group}")
        seen = 0
        async for msg in subscription.messages:  # ends after --count, or when the connection closes
            seen += 1
            write_out(_format(msg, seen, args))
            if args.count and seen >= args.count:
                return 0
        raise conn.lost_error()  # the iterator ends early only when the connection closes
    finally:
        await conn.close()


def _format(msg, number: int, args: argparse.Namespace) -> bytes:
    """One message as natscli's sub prints it (``printMsg``)."""
    if args.raw:
        return body_block(msg.data, compact=True)
    line = f"[#{number}] Received on {_q(msg.subject)}"
    if msg.reply:
        line += f" with reply {_q(msg.reply)}"
    out = (line + "\n").encode() + header_lines(msg.headers)
    return out if args.headers_only else out + body_block(msg.data)


# -- req -------------------------------------------------------------------------
async def req(args: argparse.Namespace) -> int:
    import nats.errors

    check_subject(args.subject, wildcards=False)
    settings = connection_settings(args)
    body = read_body(args, args.raw)
    timeout = settings["timeout"]
    conn = Connection(settings)
    nc = await conn.open("ferry req")
    try:
        for i in range(1, args.count + 1):
            if not args.raw:
                log(f"Sending request on {_q(args.subject)}")
            inbox = nc.new_inbox()
            replies = await _guarded(conn, nc.subscribe(inbox, max_msgs=args.replies))
            start = time.perf_counter()
            await _guarded(conn, nc.publish(args.subject, render_bytes(body, i), reply=inbox,
                                            headers=headers_for(args.headers, i)))
            got, rtt_sum, wait = 0, 0.0, timeout
            while True:
                try:
                    msg = await wait_or_lost(conn, replies.next_msg(timeout=wait))
                except nats.errors.TimeoutError:
                    break  # no (more) replies in time
                except nats.errors.Error as exc:
                    raise NatsCliError(reason(exc)) from None
                rtt = time.perf_counter() - start
                if got == 0 and _no_responders(msg):
                    raise NatsCliError(NO_RESPONDERS)
                got += 1
                _print_reply(msg, rtt, args.raw)
                if args.replies and got >= args.replies:
                    break
                # natscli: --replies 0 waits out the whole timeout; N waits avg rtt + 300 ms more
                rtt_sum += rtt
                wait = (timeout - rtt) if args.replies == 0 else rtt_sum / got + NEXT_REPLY_GRACE_S
                if wait <= 0:
                    break
            try:
                await replies.unsubscribe()
            except nats.errors.Error:
                pass  # auto-unsubscribed already after --replies messages
            if got == 0:
                raise NatsCliError(f"no reply on {_q(args.subject)} within {go_duration(timeout)}")
        return 0
    finally:
        await conn.close()


def _no_responders(msg) -> bool:
    """The server's 503 status message (no subscriber for the request's subject)."""
    return bool(msg.headers) and msg.headers.get("Status") == "503" and not msg.data


def _print_reply(msg, rtt: float, raw: bool) -> None:
    if raw:
        write_out(body_block(msg.data, compact=True))
        return
    log(f"Received with rtt {go_duration(rtt)}")
    if msg.headers:
        for key, value in msg.headers.items():
            log(f"{key}: {value}")
        log()  # natscli's log.Println(): a stamped empty line
    write_out(body_block(msg.data))


# -- reply -----------------------------------------------------------------------
async def reply(args: argparse.Namespace) -> int:
    check_subject(args.subject, wildcards=True)
    settings = connection_settings(args)
    echo = args.echo
    if args.body is None and not echo:
        log("No body or command supplied, enabling echo mode")
        echo = True
    body = (args.body or "").encode()
    conn = Connection(settings)
    nc = await conn.open("ferry reply")
    try:
        subscription = await _guarded(conn, nc.subscribe(args.subject, queue=args.queue, max_msgs=args.count))
        await _guarded(conn, nc.flush(timeout=settings["timeout"]))
        conn.check()
        log(f"Listening on {_q(args.subject)} in group {_q(args.queue)}")
        # natscli counts requests from 0: the first is [#0] and its {{Count}} is 0.
        count = 0
        async for msg in subscription.messages:
            log(f"[#{count}] Received on subject {_q(msg.subject)}:")
            for key, value in (msg.headers or {}).items():
                log(f"{key}: {value}")
            write_out(b"\n" + msg.data + b"\n")
            headers = headers_for(args.headers, count) or {}
            if echo:
                headers = {**(msg.headers or {}), **headers, "NATS-Reply-Counter": str(count)}
                data = msg.data
            else:
                data = render_bytes(body, count, request=msg.data)
            if msg.reply:
                await _guarded(conn, nc.publish(msg.reply, data, headers=headers or None))
            count += 1
            if args.count and count >= args.count:
                await _guarded(conn, nc.flush(timeout=settings["timeout"]))
                return 0
        raise conn.lost_error()  # the iterator ends early only when the connection closes
    finally:
        await conn.close()


__all__ = ["EXIT_FAILED", "pub", "reply", "req", "sub"]
