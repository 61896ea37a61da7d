"""``ferry snapshot``: download the server's diagnostic snapshot (Iggy's ``POST /snapshot``).

The server builds a ZIP of the chosen parts (adapters/iggy/snapshot.py: filesystem
overview, process list, resource usage, server logs, server config); the command
writes it to ``--out`` (default: the server's own file name, in the current
directory), reading it in bounded chunks with a progress bar on a terminal, and
prints the path and size. Permission: ``read_servers`` (Iggy's rule).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from adapters.iggy.snapshot import ALL_TYPES, COMPRESSIONS, TYPES

from ..admin import AdminError, progress, remote_session
from ..remote_target import admin_setup

DEFAULT_COMPRESSION = "Deflated"  # Iggy's default (its CLI's `snapshot` command)


def add_parser(sub, add_connection_options) -> None:
    p = sub.add_parser("snapshot", help="download the server's diagnostic snapshot (a ZIP)",
                       description="Download a ZIP of server diagnostics (Iggy's POST /snapshot). "
                                   f"Parts: {', '.join(t for t in TYPES.values())} (All = {', '.join(ALL_TYPES)}).")
    p.add_argument("--out", "-o", metavar="FILE", help="where to write it (default: the server's file name, here)")
    p.add_argument("--type", dest="types", action="append", choices=list(TYPES.values()), metavar="TYPE",
                   help="a part to include (repeatable; default All)")
    p.add_argument("--compression", default=DEFAULT_COMPRESSION, choices=list(COMPRESSIONS.values()),
                   help=f"ZIP compression (default {DEFAULT_COMPRESSION})")
    p.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    add_connection_options(p, local=False)
    p.set_defaults(func=cmd_snapshot)


def cmd_snapshot(args) -> int:
    out = Path(args.out) if args.out else None
    if out is not None and out.exists() and not args.force:
        raise AdminError(f"{out} exists (--force overwrites it)")
    target = admin_setup(args)[1]
    body = {"compression": args.compression, "snapshot_types": args.types or ["All"]}
    partial = Path(f"{out or 'ferry-snapshot'}.{os.getpid()}.part")  # renamed once whole
    bar = progress(None, "B", "snapshot")

    def advanced(n: int, total: int | None) -> None:
        if total is not None and getattr(bar, "total", total) != total:
            bar.total = total
        bar.update(n)

    try:
        with remote_session(target) as client, open(partial, "wb") as sink:
            size, name = client.download("POST", "/snapshot", body, sink, advanced)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    finally:
        bar.close()
    # the server's file name, without any directory part it might carry
    final = out if out is not None else Path(Path(name or "ferry-snapshot.zip").name)
    if final.exists() and out is None and not args.force:
        partial.unlink(missing_ok=True)
        raise AdminError(f"{final} exists (--out FILE, or --force)")
    partial.replace(final)
    sys.stdout.write(f"wrote {final} ({size:,} bytes)\n")
    return 0


__all__ = ["add_parser", "cmd_snapshot"]
