"""The PUB fast path's loops: plain PUB frames taken a receive at a time.

Theory of operation
-------------------
A client's stream is mostly ``PUB <subject> [reply] <size>\\r\\n<payload>\\r\\n``
in exactly the form clients write. :class:`~adapters.nats.codec.ServerCodec`
hands its buffer to these loops before it parses event by event, and they stop,
consuming nothing more, at the first frame that is anything else, so the event
parser reads it and both paths agree by construction (tests/nats/test_nats_fast_path.py,
test_nats_pub_runs.py).

* :func:`scan_pubs` appends ``(subject, reply, arg, payload)`` per PUB (``arg``
  the argument with its CRLF, so a MSG line can reuse it whole).
* :func:`scan_runs` groups the same frames into runs of one subject and reply,
  ``(subject, reply, count, payload_bytes, start, end)``, with no object per
  message: a producer publishes long runs of one subject, and a run nobody is
  subscribed to costs a dict lookup, not a tuple per message.
* :func:`render_msgs` turns a run's PUB frames into one subscriber's MSG frames
  in one pass (``PUB s [r] n`` -> ``MSG s <sid> [r] n``: exactly ``end - start
  + count * (len(sid) + 1)`` bytes); :func:`expand_run` gives a run back as
  ``scan_pubs`` tuples for everything the session does per message (stored
  subjects, queue groups, other protocols' subscribers, no-responders).

Each has a compiled twin in ``adapters/nats/_speedups.c`` (used unless
``FERRY_PURE_PYTHON=1`` or no build, core/compiled.py); the Python loops here
give the same results (tests compare them). Why: with the scanner compiled, a
py-spy profile of 16 B publishes still spent ~40 % of the gateway in the per-PUB
tuples and ~30 % in the per-message Python of the fan-out (docs/nats.md "Performance").

The reserved prefixes: ``refuse(subject, reply)`` is asked only when either
starts with ``_`` or ``$`` and must depend on them alone (scan_runs asks once
per run).
"""

from __future__ import annotations

from typing import Callable

from core.compiled import load as load_compiled

_CR, _LF = 0x0D, 0x0A
_UTF8 = "utf-8"
_ESC = "surrogateescape"


def scan_pubs_py(buf, pos: int, max_line: int, max_payload: int, max_digits: int, out: list,
                 refuse: Callable[[str, str], bool] | None) -> int:
    """Append every complete plain PUB from ``pos`` to ``out``; the new position."""
    find, startswith, append = buf.find, buf.startswith, out.append
    cr, lf, utf8, esc = _CR, _LF, _UTF8, _ESC
    n = len(buf)
    while startswith(b"PUB ", pos):
        start = pos + 4
        nl = find(b"\n", start + 1)
        if nl < 0 or buf[nl - 1] != cr or nl - 1 - start > max_line:
            break
        arg = buf[start:nl - 1]
        if b"\t" in arg:
            break
        parts = arg.split(b" ")
        if len(parts) == 2:
            subject_b, sizeb = parts
            reply = ""
        elif len(parts) == 3:
            subject_b, reply_b, sizeb = parts
            if not reply_b:
                break
            reply = reply_b.decode(utf8, esc)
        else:
            break
        if not subject_b or not (0 < len(sizeb) <= max_digits and sizeb.isdigit()):
            break
        body = nl + 1
        end = body + int(sizeb)
        if end - body > max_payload or n < end + 2 or buf[end] != cr or buf[end + 1] != lf:
            break
        subject = subject_b.decode(utf8, esc)
        if refuse is not None and (subject[0] in "_$" or (reply and reply[0] in "_$")) \
                and refuse(subject, reply):
            break
        append((subject, reply, buf[start:nl + 1], buf[body:end]))
        pos = end + 2
    return pos


def scan_runs_py(buf, pos: int, max_line: int, max_payload: int, max_digits: int, out: list,
                 refuse: Callable[[str, str], bool] | None) -> int:
    """The frames :func:`scan_pubs_py` takes, as runs of one subject and reply."""
    frames: list = []
    end_pos = scan_pubs_py(buf, pos, max_line, max_payload, max_digits, frames, refuse)
    at = pos
    run = None
    for subject, reply, arg, payload in frames:
        size = 4 + len(arg) + len(payload) + 2   # "PUB " arg(with CRLF) payload CRLF
        if run is not None and run[0] == subject and run[1] == reply:
            run[2] += 1
            run[3] += len(payload)
            run[5] = at + size
        else:
            if run is not None:
                out.append(tuple(run))
            run = [subject, reply, 1, len(payload), at, at + size]
        at += size
    if run is not None:
        out.append(tuple(run))
    return end_pos


def render_msgs_py(buf, start: int, end: int, count: int, sid: bytes) -> bytes:
    """One subscriber's MSG frames for the run ``buf[start:end]`` of ``count`` PUBs."""
    parts = []
    pos = start
    for _ in range(count):
        # The line's LF is searched from the subject's second byte, as scan_pubs_py does:
        # nats-server takes any byte after "PUB " as the subject's first, LF included
        # ("PUB \n 2\r\n"), and from pos + 4 that LF ended the line early (ValueError
        # on a run scan_runs reported; tests/fuzz/regressions/nats_server).
        nl = buf.index(b"\n", pos + 5)
        space = buf.index(b" ", pos + 4)
        size = int(buf[buf.rindex(b" ", space, nl - 1) + 1:nl - 1])
        frame_end = nl + 1 + size + 2
        parts += (b"MSG ", buf[pos + 4:space], b" ", sid, buf[space:frame_end])
        pos = frame_end
    if pos != end:
        raise ValueError("render_msgs: the run is not the PUB frames scan_runs reported")
    return b"".join(parts)


_compiled = load_compiled("adapters.nats._speedups")
COMPILED = _compiled is not None and hasattr(_compiled, "scan_runs")
scan_pubs = _compiled.scan_pubs if COMPILED else scan_pubs_py
scan_runs = _compiled.scan_runs if COMPILED else scan_runs_py
render_msgs = _compiled.render_msgs if COMPILED else render_msgs_py

# The limits a run was already checked against; expand_run only re-splits it.
_NO_LIMIT = 1 << 62


def expand_run(buf, start: int, end: int) -> list:
    """The run ``buf[start:end]`` as :func:`scan_pubs` tuples (already checked
    frames: no limits, no refusal), for the per-message path. The compiled
    scanner reads the receive buffer in place, through a view that ends at
    ``end`` (released before returning: a bytearray with a live view cannot be
    trimmed); the Python loop needs the ``find`` of a bytes copy."""
    out: list = []
    if COMPILED:
        with memoryview(buf) as whole, whole[:end] as view:
            scan_pubs(view, start, _NO_LIMIT, _NO_LIMIT, 18, out, None)
    else:
        scan_pubs_py(bytes(buf[start:end]), 0, _NO_LIMIT, _NO_LIMIT, 18, out, None)
    return out


__all__ = ["COMPILED", "expand_run", "render_msgs", "render_msgs_py", "scan_pubs", "scan_pubs_py", "scan_runs",
           "scan_runs_py"]
