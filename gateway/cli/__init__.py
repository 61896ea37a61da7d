"""The ``ferry`` command line (the console script is ``gateway.cli:main``).

- ferry.py: the parser, ``version``, ``stream``/``topic``/``produce``/``tail``,
  :func:`main` and the one-line error reporting
- exits.py: the exit codes every command shares
- serve.py: ``serve``'s flags (shared with ``config check``) and the command
- admin.py, admin_perm.py, admin_group.py, snapshot.py: ``user``, ``perm``,
  ``pat``, ``group``, ``snapshot`` (on the running server or ``--local``)
- config.py: ``config sample|check``
- nats.py (the parsers), nats_cmds.py, nats_bench.py (the bodies), nats_client.py
  (what they share): ``pub``, ``sub``, ``req``, ``reply``, ``bench`` (nats-py
  clients, any NATS server)
- nats_server.py: ``ferry nats-server``, the drop-in for nats-server's own flags
"""

from .ferry import build_parser, main
from .serve import serve_flags

__all__ = ["build_parser", "main", "serve_flags"]
