"""The ``ferry`` command line: the parser, ``version``, the data commands and :func:`main`.

Exit codes (gateway/cli/exits.py): 0 success; 1 a command failed (unknown stream,
bad header, the server unreachable or refusing, a crash); 2 the process could not
start as asked (bad configuration, data directory held by another process, a
listener port taken, bad usage); 130 interrupted before it could shut down cleanly.

A closed stdout (``ferry tail ... | head``) ends a command quietly with exit
0, as ``git log | head`` does: the reader had what it wanted. The admin
commands talk to a running server unless given ``--local`` (docs/cli.md).
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from core.errors import FerryError

from .. import version
from ..config import ConfigError
from ..lock import DataDirLocked
from ..registry import ListenerStartError, Registry, RegistryError
from . import serve
from .exits import EXIT_CANNOT_START, EXIT_FAILED, EXIT_INTERRUPTED

NATS_SERVER = "nats-server"  # the drop-in command (gateway/cli/nats_server.py)


# -- parser ------------------------------------------------------------------
class _VersionAction(argparse.Action):
    """``--version``, reading the version only when asked (see gateway.version)."""

    def __init__(self, option_strings, dest, **kwargs) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        print(f"ferry {version()}")
        parser.exit()


def _add_admin(sub) -> None:
    from .admin import add_connection_options

    stream = sub.add_parser("stream", help="create, list and delete streams (on the running server)")
    ssub = stream.add_subparsers(dest="action", required=True, metavar="{create,list,delete}")
    p = ssub.add_parser("create", help="create a stream")
    p.add_argument("name")
    p.add_argument("--id", type=int, dest="stream_id", help="explicit 0-based id (default: next free)")
    p.add_argument("--exist-ok", action="store_true", help="an existing stream of that name is fine (exit 0)")
    p = ssub.add_parser("list", help="list streams")
    p.add_argument("--json", action="store_true", help="one JSON array instead of a table")
    p = ssub.add_parser("delete", help="delete a stream and everything in it")
    p.add_argument("stream", help="name or id")
    for p in ssub.choices.values():
        add_connection_options(p)
        p.set_defaults(func=cmd_stream)

    topic = sub.add_parser("topic", help="create, list and delete topics (on the running server)")
    tsub = topic.add_subparsers(dest="action", required=True, metavar="{create,list,delete}")
    p = tsub.add_parser("create", help="create a topic in a stream")
    p.add_argument("stream", help="name or id")
    p.add_argument("name")
    p.add_argument("--partitions", type=int, default=1, help="partition count (default 1)")
    p.add_argument("--id", type=int, dest="topic_id", help="explicit 0-based id (default: next free)")
    p.add_argument("--message-expiry", metavar="DURATION", help="delete messages older than this (90s, 2h, 7d)")
    p.add_argument("--max-size", metavar="SIZE", help="cap the topic's size (bytes, or like 512MiB)")
    p.add_argument("--exist-ok", action="store_true",
                   help="an existing topic of that name is fine (exit 0; its settings are left as they are)")
    p = tsub.add_parser("list", help="list a stream's topics")
    p.add_argument("stream", help="name or id")
    p.add_argument("--json", action="store_true", help="one JSON array instead of a table")
    p = tsub.add_parser("delete", help="delete a topic and its messages")
    p.add_argument("stream", help="name or id")
    p.add_argument("topic", help="name or id")
    for p in tsub.choices.values():
        add_connection_options(p)
        p.set_defaults(func=cmd_topic)

    p = sub.add_parser("produce", help="append one message (or stdin) to a topic")
    p.add_argument("address", metavar="STREAM/TOPIC")
    p.add_argument("message", nargs="?", default="-", help="the payload; - (default) reads stdin")
    p.add_argument("--header", action="append", default=[], metavar="K=V",
                   help="a string header, or K:KIND=V with KIND int64, bool, float64, raw (base64), ...")
    p.add_argument("--key", help="partition key: XXH32(key) %% partitions picks the partition")
    p.add_argument("--partition", type=int, help="explicit partition id")
    p.add_argument("--lines", action="store_true", help="with -, one message per line of stdin")
    add_connection_options(p)
    p.set_defaults(func=cmd_produce)

    p = sub.add_parser("tail", help="print a topic's messages (offset, timestamp, headers, payload)")
    p.add_argument("address", metavar="STREAM/TOPIC")
    p.add_argument("--from", dest="start", default="first", metavar="first|last|OFFSET",
                   help="where to start in each partition (default first)")
    p.add_argument("--partition", type=int, help="only this partition (default: all)")
    p.add_argument("--count", "-n", type=int, metavar="N", help="stop after N messages (default: all)")
    p.add_argument("--follow", "-f", action="store_true", help="keep printing new messages until Ctrl-C")
    p.add_argument("--json", action="store_true", help="one JSON object per message")
    add_connection_options(p)
    p.set_defaults(func=cmd_tail)

    from .admin import add_parsers as add_admin_commands  # ferry user|perm|pat|group

    add_admin_commands(sub)


def build_parser(registry: Registry | None = None) -> argparse.ArgumentParser:
    """The ``ferry`` parser. ``serve``'s port flags come from ``registry``, by default
    the listener table (registry.DEFAULT_LISTENERS: every product listener, with its
    port), not from discovering the listener modules: importing those loads trio,
    aioquic, h2 and every adapter (~1 s), which ``ferry version`` need not pay."""
    registry = registry or Registry.of()
    parser = argparse.ArgumentParser(prog="ferry", description="Ferry: one durable log, many protocols.")
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", required=True,
                                metavar="{serve,nats-server,version,stream,topic,produce,tail,user,perm,pat,group,snapshot,"
                                        "config,pub,sub,req,reply,bench,pipeline}")
    serve.add_parser(sub, registry)
    # Listed for --help only: main() hands "nats-server" to gateway.cli.nats_server before argparse.
    sub.add_parser(NATS_SERVER, add_help=False,
                   help="run as a drop-in nats-server (nats-server's flags; ferry nats-server --help)")
    p = sub.add_parser("version", help="print the version")
    p.set_defaults(func=lambda args: print(f"ferry {version()}") or 0)
    _add_admin(sub)
    from .config import add_parsers as add_config_commands  # ferry config sample|check
    from .nats import add_parsers as add_nats_tools  # ferry pub|sub|req|reply|bench

    add_config_commands(sub)
    add_nats_tools(sub)
    from adapters.spark.pipeline import add_parser as add_pipeline  # Spark jobs; pyspark loads only when run

    add_pipeline(sub)
    return parser


def admin_config(args: argparse.Namespace):
    """``(config, target)`` of an admin command (gateway/remote_target.py)."""
    from ..remote_target import admin_setup

    return admin_setup(args)


# -- commands ----------------------------------------------------------------
def cmd_stream(args: argparse.Namespace) -> int:
    from .. import admin

    cfg, server = admin_config(args)
    if args.action == "create":
        admin.stream_create(cfg, args.name, args.stream_id, sys.stdout, server=server, exist_ok=args.exist_ok)
    elif args.action == "list":
        admin.stream_list(cfg, args.json, sys.stdout, server=server)
    else:
        admin.stream_delete(cfg, args.stream, sys.stdout, server=server)
    return 0


def cmd_topic(args: argparse.Namespace) -> int:
    from .. import admin

    cfg, server = admin_config(args)
    if args.action == "create":
        admin.topic_create(cfg, args.stream, args.name, partitions=args.partitions, topic_id=args.topic_id,
                           message_expiry=args.message_expiry, max_size=args.max_size, out=sys.stdout,
                           server=server, exist_ok=args.exist_ok)
    elif args.action == "list":
        admin.topic_list(cfg, args.stream, args.json, sys.stdout, server=server)
    else:
        admin.topic_delete(cfg, args.stream, args.topic, sys.stdout, server=server)
    return 0


def cmd_produce(args: argparse.Namespace) -> int:
    from .. import admin

    cfg, server = admin_config(args)
    admin.produce(cfg, args.address, args.message, headers=args.header, key=args.key,
                  partition=args.partition, lines=args.lines, stdin=sys.stdin.buffer, out=sys.stdout,
                  server=server)
    return 0


def cmd_tail(args: argparse.Namespace) -> int:
    from .. import admin

    cfg, server = admin_config(args)
    try:
        admin.tail(cfg, args.address, spec=args.start, partition=args.partition, follow=args.follow,
                   as_json=args.json, out=sys.stdout, count=args.count, server=server)
    except KeyboardInterrupt:
        if not args.follow:
            raise
    return 0  # Ctrl-C is how a follow ends: not a failure


# -- entry point -------------------------------------------------------------
def _stdout_closed() -> int:
    """The reader of our stdout went away (``| head``): stop quietly, exit 0.

    Python's docs (signal, "Note on SIGPIPE") give the recipe: point stdout at
    /dev/null so the interpreter's final flush of what is still buffered does
    not raise again (and print "Exception ignored ... BrokenPipeError")."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # an in-process stdout without a descriptor
        pass
    return 0



def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _leaves(sub)]
    return [exc]


def _report(exc: BaseException) -> int | None:
    """Print a known failure as one line to stderr and return its exit code;
    None for anything else (a bug: let the traceback show)."""
    from ..admin import AdminError, UsageError
    from ..remote import NotHttp, RemoteError, RemoteUnreachable

    if isinstance(exc, NotHttp):
        print(f"ferry: error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if isinstance(exc, RemoteUnreachable):
        print(f"ferry: error: cannot reach the server at {exc.url}: {exc.reason}; start it with `ferry serve` "
              "(or point --server / FERRY_SERVER / --config at it), or use --local to open its data "
              "directory directly", file=sys.stderr)
        return EXIT_FAILED
    if isinstance(exc, RemoteError):
        print(f"ferry: error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if isinstance(exc, ConfigError):
        print(f"ferry: config error: {exc}", file=sys.stderr)
        return EXIT_CANNOT_START
    if isinstance(exc, (DataDirLocked, ListenerStartError)):
        print(f"ferry: error: {exc}", file=sys.stderr)
        return EXIT_CANNOT_START
    from ..jetstream_store.errors import ClusterUnreachable

    if isinstance(exc, ClusterUnreachable):
        print(f"ferry: error: cannot use the store cluster: {exc}", file=sys.stderr)
        return EXIT_CANNOT_START
    if isinstance(exc, AdminError):
        print(f"ferry: error: {exc}", file=sys.stderr)
        return EXIT_CANNOT_START if isinstance(exc, UsageError) else EXIT_FAILED
    if isinstance(exc, FerryError):
        print(f"ferry: error: {exc.message}", file=sys.stderr)
        return EXIT_FAILED
    if isinstance(exc, RegistryError):
        print(f"ferry: internal error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """The ``ferry`` console script; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == [NATS_SERVER]:   # nats-server's own flag syntax: gateway/cli/nats_server.py parses it
        from .nats_server import main as nats_server_main

        return _guarded(nats_server_main, argv[1:])
    try:
        parser = build_parser()
    except RegistryError as exc:
        print(f"ferry: internal error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    unknown = _unknown_command(parser, argv)
    if unknown:
        print(unknown, file=sys.stderr)
        return EXIT_CANNOT_START
    args = parser.parse_args(argv)
    return _guarded(args.func, args)


def _subcommands(parser: argparse.ArgumentParser) -> dict | None:
    for action in parser._actions:  # noqa: SLF001 - argparse keeps subparsers only here
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            return action.choices
    return None


def _unknown_command(parser: argparse.ArgumentParser, argv: list[str]) -> str | None:
    """``ferry strem list`` -> "ferry: unknown command 'strem' (did you mean 'stream'?)";
    the same for an action (``ferry stream lst``). None when the words are known."""
    import difflib

    prog, noun = "ferry", "command"
    for word in argv[:2]:
        choices = _subcommands(parser)
        if choices is None or word.startswith("-"):
            return None
        if word in choices:
            parser, prog, noun = choices[word], f"ferry {word}", "action"
            continue
        close = difflib.get_close_matches(word, [c for c in choices if not c.startswith("-")], n=1, cutoff=0.6)
        hint = f"did you mean '{close[0]}'?" if close else f"see {prog} --help"
        return f"{prog}: unknown {noun} '{word}' ({hint})"
    return None


def _guarded(func, arg) -> int:
    """Run a command, turning known failures into one line and an exit code."""
    try:
        return func(arg)
    except BrokenPipeError:
        return _stdout_closed()
    except KeyboardInterrupt:
        print("ferry: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BaseException as exc:  # noqa: BLE001 - sorted below; unknown ones re-raised
        leaves = _leaves(exc)
        codes = [_report(leaf) for leaf in leaves[:1]] if len(leaves) == 1 else [None]
        if codes[0] is None:
            raise
        return codes[0]


__all__ = ["build_parser", "main"]
