"""``ferry pub``, ``sub``, ``req``, ``reply`` and ``bench``: the ``nats`` CLI's everyday
commands, on any NATS server (Ferry's NATS listener or nats-server itself).

They are clients, not the gateway: each runs nats-py on asyncio in its own process.
Output follows natscli (github.com/nats-io/natscli, cli/pub_command.go,
sub_command.go, reply_command.go, util.go ``outPutMSGBody``): status lines go to
stderr behind an ``HH:MM:SS`` stamp (Go's ``log`` package), message bodies to
stdout. Connection options and their variables are natscli's (``NATS_URL``,
``NATS_USER``, ``NATS_PASSWORD``, ``NATS_TOKEN``, ``NATS_CREDS``, ``NATS_TIMEOUT``).
Without any of those credentials (nor any in the URL) they log in as the admin
commands do (:func:`~gateway.cli.nats_client.ferry_login`: ``$FERRY_TOKEN``,
``$FERRY_USER``/``$FERRY_PASSWORD``, else the configured root user), since
``ferry serve`` admits only Ferry users. This module registers the commands;
their bodies are nats_cmds.py and nats_bench.py, what they share nats_client.py.

Exit codes are gateway/cli/exits.py's: 0 done (Ctrl-C is how ``sub`` and ``reply``
end, so it is 0 there, as for ``ferry tail --follow``; a closed stdout pipe too),
1 failed (cannot connect, no responders, a server error), 2 bad usage, 130
interrupted (``pub``, ``req``, ``bench`` cut short by Ctrl-C).
"""

from __future__ import annotations

import argparse

from . import nats_bench, nats_cmds as cmds
from .exits import EXIT_USAGE
from .nats_client import REPLY_QUEUE, add_connection_options, parse_duration, parse_header, positive_int, run


class OneLineParser(argparse.ArgumentParser):
    """Bad usage as one line on stderr and exit 2 (gateway/cli/exits.py's EXIT_USAGE),
    instead of argparse's usage block; unknown flags are caught here too, so the
    line names the subcommand rather than the top-level parser."""

    def error(self, message: str):  # noqa: D401 - argparse's hook
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    def parse_known_args(self, args=None, namespace=None):
        ns, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return ns, extras


# -- parser ----------------------------------------------------------------------
def _parser(sub, name: str, **kwargs) -> argparse.ArgumentParser:
    p = sub.add_parser(name, **kwargs)
    p.__class__ = OneLineParser  # one-line usage errors; the class only adds two overrides
    return p


def add_parsers(sub) -> None:
    """Add ``pub``, ``sub``, ``req``, ``reply`` and ``bench`` to the ``ferry`` parser's subparsers."""
    header = dict(action="append", default=[], type=parse_header, metavar="K:V", dest="headers",
                  help="a header (repeatable; a key given twice keeps its last value)")

    p = _parser(sub, "pub", help="publish a message to a NATS subject (like nats pub)",
                description="Publish BODY (or stdin) to SUBJECT. {{Count}} in the body and headers "
                            "is the 1-based message number; also {{ID}}, {{Time}}, {{TimeStamp}}, "
                            "{{Unix}}, {{UnixNano}}, {{Random MIN MAX}}.")
    p.add_argument("subject")
    p.add_argument("body", nargs="?", default="-", help="the message body; - or absent reads stdin")
    p.add_argument("-H", "--header", **header)
    p.add_argument("--count", type=positive_int, default=1, metavar="N", help="publish N messages (default 1)")
    p.add_argument("--sleep", type=parse_duration, default=0.0, metavar="DURATION",
                   help="sleep between messages (like 100ms)")
    p.add_argument("--reply", metavar="SUBJECT", help="the reply subject to send with each message")
    p.add_argument("-q", "--quiet", action="store_true", help="no confirmation lines")
    add_connection_options(p)
    p.set_defaults(func=lambda a: run(cmds.pub, a))

    p = _parser(sub, "sub", help="print the messages sent to a NATS subject (like nats sub)",
                description="Subscribe to SUBJECT (wildcards allowed) and print each message until "
                            "Ctrl-C or --count messages.")
    p.add_argument("subject")
    p.add_argument("--queue", metavar="GROUP", help="join this queue group (one member gets each message)")
    p.add_argument("--count", type=positive_int, default=0, metavar="N", help="exit after N messages")
    p.add_argument("-r", "--raw", action="store_true", help="print only the bodies, one per line")
    p.add_argument("--headers-only", action="store_true", help="print headers but not bodies")
    add_connection_options(p)
    p.set_defaults(func=lambda a: run(cmds.sub, a, ctrl_c_ends=True))

    p = _parser(sub, "req", aliases=["request"], help="send a request and print the reply (like nats req)",
                description="Publish BODY to SUBJECT with a reply inbox and print the reply: status "
                            "lines and reply headers on stderr, the body on stdout (as nats req).")
    p.add_argument("subject")
    p.add_argument("body", nargs="?", default="-", help="the request body; - or absent reads stdin")
    p.add_argument("-H", "--header", **header)
    p.add_argument("--replies", type=positive_int, default=1, metavar="N",
                   help="wait for N replies (0: all that come until --timeout; default 1)")
    p.add_argument("--count", type=positive_int, default=1, metavar="N", help="send N requests (default 1)")
    p.add_argument("-r", "--raw", action="store_true", help="print only the reply bodies")
    add_connection_options(p)
    p.set_defaults(func=lambda a: run(cmds.req, a))

    p = _parser(sub, "reply", help="answer requests on a NATS subject (like nats reply)",
                description="Answer every request on SUBJECT with BODY ({{Count}} and {{Request}} "
                            "templates allowed), or echo it back with --echo.")
    p.add_argument("subject")
    p.add_argument("body", nargs="?", help="the reply body (absent: --echo)")
    p.add_argument("--echo", action="store_true", help="reply with the request's own body and headers")
    p.add_argument("-q", "--queue", default=REPLY_QUEUE, metavar="GROUP",
                   help=f"queue group (default {REPLY_QUEUE}, natscli's)")
    p.add_argument("--count", type=positive_int, default=0, metavar="N", help="exit after N requests")
    p.add_argument("-H", "--header", **header)
    add_connection_options(p)
    p.set_defaults(func=lambda a: run(cmds.reply, a, ctrl_c_ends=True))

    p = _parser(sub, "bench", help="measure pub/sub throughput or request latency (like nats bench)",
                description="Run --pub publishers and --sub subscribers on SUBJECT, each on its own "
                            "connection, --msgs messages of --size bytes; or with --request, publishers "
                            "send requests one at a time and --sub repliers answer them.")
    nats_bench.add_arguments(p)
    add_connection_options(p)
    p.set_defaults(func=lambda a: run(nats_bench.bench, a))
