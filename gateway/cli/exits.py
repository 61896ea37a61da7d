"""The exit codes of every ``ferry`` command, in one place (docs/cli.md).

0 success; 1 a command failed (unknown stream, bad header, the server
unreachable or refusing, a crash); 2 the process could not start as asked (bad
configuration, data directory held by another process, a listener port taken,
bad usage); 130 interrupted before it could shut down cleanly. ``ferry serve``
adds its own shutdown codes (gateway/server.py ``EXIT_*``).
"""

EXIT_FAILED = 1
EXIT_CANNOT_START = 2  # bad config, data dir held by another process, a port taken
EXIT_USAGE = EXIT_CANNOT_START  # bad usage is "cannot start as asked" (argparse's own code, 2)
EXIT_INTERRUPTED = 130  # 128 + SIGINT, the shell convention
