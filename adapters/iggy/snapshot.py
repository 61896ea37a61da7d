"""GetSnapshotFile: a ZIP archive of diagnostics (iggy.md 4.1, 5.10; HTTP ``POST /snapshot``).

Theory of operation
-------------------
A snapshot request names a compression and a list of snapshot types
(iggy.md 3.6). :func:`request_from_codes` (binary) and
:func:`request_from_names` (HTTP JSON) check it into a :class:`SnapshotRequest`:
"All" stands for every type except Test and may not be combined with others
(status 3, as apache/iggy ``core/server/src/snapshot.rs``); an unknown code or
name is status 3 too.

Collecting is split in two so the trio loop never waits on the disk:

1. :func:`inputs_from_broker` (trio thread, quick) copies what only the trio
   thread may read: the broker's totals, the data directory, the effective
   configuration and the recent log lines the gateway kept
   (``broker.diagnostics``, gateway/diagnostics.py);
2. :func:`build_snapshot` (a worker thread) walks the data directory and
   ``/proc``, renders one text file per type and zips them with the stdlib
   ``zipfile``. It is pure apart from those reads: everything else arrives
   as arguments, so the binary and the HTTP adapters share it.

One file per type, named as Iggy names them (``filesystem_overview.txt``,
``process_list.txt``, ``resource_usage.txt``, ``test.txt``,
``server_logs.txt``, ``server_config.txt``). Iggy shells out to ``ls``,
``ps`` and ``top``; Ferry reads the same facts itself, bounded (the limits
below). Secrets in the configuration (and in command lines of the process
list) are replaced by ``<redacted>`` before anything is written.

Zstd and Xz have no ``zipfile`` method in this Python: they are refused with
status 3 (Iggy has no code of its own for "compression not supported"; its
server supports all six). At most one snapshot is collected at a time, as
Iggy's single-flight rule; a second concurrent request, or an archive past
:data:`MAX_ARCHIVE_BYTES`, gets 9000 SnapshotFileCompletionFailed.
"""

from __future__ import annotations

import io
import json
import os
import resource
import shutil
import sys
import threading
import time
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from .errors import IggyError

# iggy.md 3.6: SnapshotCompression and SystemSnapshotType codes -> Iggy's variant names.
COMPRESSIONS = {1: "Stored", 2: "Deflated", 3: "Bzip2", 4: "Zstd", 5: "Lzma", 6: "Xz"}
TYPES = {1: "FilesystemOverview", 2: "ProcessList", 3: "ResourceUsage", 4: "Test", 5: "ServerLogs",
         6: "ServerConfig", 100: "All"}
# What "All" expands to: every type but Test (apache/iggy SystemSnapshotType::all_snapshot_types).
ALL_TYPES = ("FilesystemOverview", "ProcessList", "ResourceUsage", "ServerLogs", "ServerConfig")
FILE_NAMES = {"FilesystemOverview": "filesystem_overview.txt", "ProcessList": "process_list.txt",
              "ResourceUsage": "resource_usage.txt", "Test": "test.txt", "ServerLogs": "server_logs.txt",
              "ServerConfig": "server_config.txt"}
_ZIP_METHODS = {"Stored": zipfile.ZIP_STORED, "Deflated": zipfile.ZIP_DEFLATED,
                "Bzip2": zipfile.ZIP_BZIP2, "Lzma": zipfile.ZIP_LZMA}
TEST_CONTENT = b"test\n"  # Iggy's Test file is the output of `echo test`

# A data directory with thousands of partitions holds tens of thousands of
# files; listing 10 000 (about 1 MB of text) shows its shape without letting
# one request read a whole huge tree. The rest is counted, not listed.
MAX_FS_ENTRIES = 10_000
MAX_PROCESSES = 4_096  # a busy host's `ps` output; each line is read from /proc
MAX_CMDLINE_CHARS = 1_000  # per process; Linux allows far longer argument lists
# A VSR reply frame carries at most 64 MiB (iggy-current.md 4; apache/iggy
# refuses a larger archive with 9000); the bounds above keep us far below it.
MAX_ARCHIVE_BYTES = 64 * 1024 * 1024 - 256
REDACTED = "<redacted>"
# A config key or command-line flag containing one of these names a secret.
SECRET_WORDS = ("password", "passwd", "secret", "token", "key", "credential")
PROC = Path("/proc")

_IN_PROGRESS = threading.Lock()  # single flight: one collection at a time


class SnapshotRefused(Exception):
    """A snapshot that cannot be made: ``code`` is the Iggy status, ``field``
    the HTTP JSON field at fault (None when no field is)."""

    def __init__(self, code: IggyError, reason: str, field: str | None = None) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason
        self.field = field


@dataclass(frozen=True, slots=True)
class SnapshotRequest:
    compression: str  # a COMPRESSIONS name that zipfile can write
    types: tuple[str, ...]  # type names, "All" expanded, duplicates dropped


@dataclass(frozen=True, slots=True)
class SnapshotInputs:
    """What :func:`build_snapshot` needs from the trio thread."""

    data_dir: Path
    totals: Mapping[str, int] = field(default_factory=dict)  # the broker's counts (ResourceUsage)
    config: Mapping[str, Any] | None = None  # effective configuration; redacted when written
    log_lines: Sequence[str] | None = None  # None: nobody keeps log lines
    log_note: str = ""  # says what the log lines are (level, bound)
    now: float = 0.0  # time.time() of the request; also the ZIP entries' date


# -- requests --------------------------------------------------------------------------
def request_from_codes(compression: int, types: Sequence[int]) -> SnapshotRequest:
    """The binary request (iggy.md 4.1). Raises SnapshotRefused (status 3)."""
    if compression not in COMPRESSIONS:
        raise SnapshotRefused(IggyError.INVALID_COMMAND, f"unknown compression {compression}", "compression")
    names = []
    for code in types:
        if code not in TYPES:
            raise SnapshotRefused(IggyError.INVALID_COMMAND, f"unknown snapshot type {code}", "snapshot_types")
        names.append(TYPES[code])
    return _checked(COMPRESSIONS[compression], names)


def request_from_names(compression: object, types: object) -> SnapshotRequest:
    """The HTTP JSON request: Iggy's variant names (``"Deflated"``,
    ``["FilesystemOverview", ...]``). Raises SnapshotRefused naming the field."""
    if compression not in COMPRESSIONS.values():
        raise SnapshotRefused(IggyError.INVALID_FORMAT, f"must be one of {', '.join(COMPRESSIONS.values())}",
                              "compression")
    if not isinstance(types, list):
        raise SnapshotRefused(IggyError.INVALID_FORMAT, "must be an array of snapshot type names",
                              "snapshot_types")
    for i, name in enumerate(types):
        if name not in TYPES.values():
            raise SnapshotRefused(IggyError.INVALID_FORMAT, f"must be one of {', '.join(TYPES.values())}",
                                  f"snapshot_types[{i}]")
    return _checked(compression, types)


def _checked(compression: str, names: Sequence[str]) -> SnapshotRequest:
    if "All" in names:
        if len(names) > 1:
            raise SnapshotRefused(IggyError.INVALID_COMMAND, "All cannot be combined with other types",
                                  "snapshot_types")
        names = ALL_TYPES
    if compression not in _ZIP_METHODS:
        raise SnapshotRefused(IggyError.INVALID_COMMAND,
                              f"{compression} is not supported here (use Stored, Deflated, Bzip2 or Lzma)",
                              "compression")
    return SnapshotRequest(compression, tuple(dict.fromkeys(names)))


# -- inputs (trio thread) -------------------------------------------------------------------
def inputs_from_broker(broker, clients: int = 0) -> SnapshotInputs:
    """Copy what a snapshot needs from ``broker`` (quick; call on the trio thread).
    ``clients`` is the number of Iggy sessions (the adapter knows them)."""
    totals = {**asdict(broker.totals()), "iggy_clients": clients}
    diag = broker.diagnostics
    if diag is not None:
        config, lines, note = diag.config, diag.log_lines(), diag.log_note
    else:
        config, lines, note = _broker_config(broker.cfg), None, ""
    return SnapshotInputs(Path(broker.data_dir), totals, config, lines, note, time.time())


def _broker_config(cfg) -> dict[str, Any]:
    """A bare broker's settings (no gateway around it)."""
    return {"log": plain_data(cfg.log), "root_username": cfg.root_username, "root_password": cfg.root_password,
            "retention_interval_s": cfg.retention_interval_s, "bindings": plain_data(cfg.bindings)}


def plain_data(value: Any) -> Any:
    """Dataclasses, mappings, tuples and paths as JSON-ready values (also what
    gateway/diagnostics.py hands over as the effective configuration)."""
    if hasattr(value, "__dataclass_fields__"):
        return {name: plain_data(getattr(value, name)) for name in value.__dataclass_fields__}
    if isinstance(value, Mapping):
        return {str(k): plain_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_data(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


# -- building (worker thread) -----------------------------------------------------------
def build_snapshot(request: SnapshotRequest, inputs: SnapshotInputs) -> bytes:
    """The ZIP archive's bytes. Reads the disk and /proc: run it in a worker
    thread. Raises SnapshotRefused (9000) while another snapshot is being
    built or when the archive would not fit one reply."""
    if not _IN_PROGRESS.acquire(blocking=False):
        raise SnapshotRefused(IggyError.SNAPSHOT_FILE_COMPLETION_FAILED, "another snapshot is being collected")
    try:
        out = io.BytesIO()
        stamp = time.localtime(inputs.now or time.time())[:6]
        with zipfile.ZipFile(out, "w", compression=_ZIP_METHODS[request.compression]) as zf:
            for name in request.types:
                entry = zipfile.ZipInfo(FILE_NAMES[name], date_time=max(stamp, (1980, 1, 1, 0, 0, 0)))
                entry.compress_type = _ZIP_METHODS[request.compression]
                entry.external_attr = 0o644 << 16
                zf.writestr(entry, _section(name, inputs))
        archive = out.getvalue()
    finally:
        _IN_PROGRESS.release()
    if len(archive) > MAX_ARCHIVE_BYTES:
        raise SnapshotRefused(IggyError.SNAPSHOT_FILE_COMPLETION_FAILED, f"archive of {len(archive)} bytes")
    return archive


def _section(name: str, inputs: SnapshotInputs) -> bytes:
    try:
        text = _RENDERERS[name](inputs)
    except OSError as exc:  # one section failing still ships the others (as Iggy)
        text = f"{name}: could not be collected: {exc}\n"
    return text if isinstance(text, bytes) else text.encode("utf-8", "replace")


def filesystem_overview(inputs: SnapshotInputs) -> str:
    """Directories and files under the data directory, by path: size, modification
    time. Stops after :data:`MAX_FS_ENTRIES` entries (the walk, not just the list)."""
    root = inputs.data_dir
    listed: list[tuple[str, str]] = []
    notes: list[str] = []
    files = total = 0
    stack = [root]
    while stack and len(listed) < MAX_FS_ENTRIES:
        path = stack.pop()
        try:
            with os.scandir(path) as it:
                entries = list(it)
        except OSError as exc:
            notes.append(f"# cannot list {path}: {exc.strerror}")
            continue
        for entry in entries:
            if len(listed) >= MAX_FS_ENTRIES:
                stack.append(path)  # unfinished: the note below says so
                break
            try:
                st = entry.stat(follow_symlinks=False)
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:  # removed while we walked (retention, a delete)
                continue
            rel = os.path.relpath(entry.path, root) + ("/" if is_dir else "")
            listed.append((rel, f"{st.st_size:>12}  {_utc(st.st_mtime)}  {_one_line(rel)}"))
            if is_dir:
                stack.append(Path(entry.path))
            else:
                files += 1
                total += st.st_size
    if stack:
        notes.append(f"# listing stopped after {MAX_FS_ENTRIES} entries (the limit); totals count those")
    lines = [f"# data directory {root}", "#   size_bytes  modified_utc          path"]
    lines += [line for _rel, line in sorted(listed)]
    lines += notes
    lines.append(f"# {files} files, {len(listed) - files} directories, {total} bytes in files")
    try:
        du = shutil.disk_usage(root)
        lines.append(f"# filesystem: {du.total} bytes total, {du.used} used, {du.free} free")
    except OSError:
        pass
    return "\n".join(lines) + "\n"


def process_list(inputs: SnapshotInputs) -> str:
    """The host's processes from /proc: pid, parent, state, RSS, name, command line."""
    if not PROC.is_dir():
        return (f"# /proc is not available on {sys.platform}: only this process is listed\n"
                f"{os.getpid()}  {_redact_args(sys.argv)}\n")
    pids = sorted(int(p.name) for p in PROC.iterdir() if p.name.isdigit())
    page = os.sysconf("SC_PAGE_SIZE")
    lines = [f"# {len(pids)} processes", "#    pid    ppid state   rss_kib  name              command"]
    for pid in pids[:MAX_PROCESSES]:
        try:
            stat = (PROC / str(pid) / "stat").read_text()
            raw = (PROC / str(pid) / "cmdline").read_bytes()
        except OSError:  # it exited meanwhile, or we may not read it
            continue
        name = _one_line(stat[stat.find("(") + 1 : stat.rfind(")")])
        rest = stat[stat.rfind(")") + 2 :].split()
        state, ppid, rss = rest[0], rest[1], int(rest[21]) * page // 1024
        args = [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a]
        cmd = _one_line(_redact_args(args)[:MAX_CMDLINE_CHARS]) if args else f"[{name}]"
        lines.append(f"{pid:>8} {ppid:>7} {state:>5} {rss:>9}  {name:<16}  {cmd}")
    if len(pids) > MAX_PROCESSES:
        lines.append(f"# {len(pids) - MAX_PROCESSES} more processes not listed (limit {MAX_PROCESSES})")
    return "\n".join(lines) + "\n"


def resource_usage(inputs: SnapshotInputs) -> str:
    """This process's CPU time, memory, open files and threads; the broker's totals."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    usage: dict[str, Any] = {
        "pid": os.getpid(),
        "cpu_user_seconds": round(ru.ru_utime, 3),
        "cpu_system_seconds": round(ru.ru_stime, 3),
        "max_rss_kib": ru.ru_maxrss,  # Linux reports KiB
        "python_threads": threading.active_count(),
    }
    status = PROC / "self" / "status"
    if status.exists():
        for line in status.read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmSize", "Threads"):
                usage[{"VmRSS": "rss", "VmSize": "virtual_memory", "Threads": "os_threads"}[key]] = value.strip()
        usage["open_fds"] = len(os.listdir(PROC / "self" / "fd"))
    if hasattr(os, "getloadavg"):
        usage["load_average"] = [round(x, 2) for x in os.getloadavg()]
    return json.dumps({"process": usage, "broker": dict(inputs.totals)}, indent=2) + "\n"


def server_logs(inputs: SnapshotInputs) -> str:
    if inputs.log_lines is None:
        return ("# no log lines: this broker runs without a gateway, which is what keeps\n"
                "# recent log lines (gateway/diagnostics.py); see the process's stderr\n")
    head = f"# {len(inputs.log_lines)} recent log lines, oldest first; {inputs.log_note}".rstrip("; ")
    return "\n".join([head, *inputs.log_lines]) + "\n"


def server_config(inputs: SnapshotInputs) -> str:
    body = json.dumps(redact(plain_data(inputs.config or {})), indent=2, sort_keys=False)
    return f"# effective configuration; secrets shown as {REDACTED}\n{body}\n"


def _test(inputs: SnapshotInputs) -> bytes:
    return TEST_CONTENT


_RENDERERS = {"FilesystemOverview": filesystem_overview, "ProcessList": process_list,
              "ResourceUsage": resource_usage, "Test": _test, "ServerLogs": server_logs,
              "ServerConfig": server_config}


# -- redaction ----------------------------------------------------------------------
def _secret_name(name: str) -> bool:
    low = name.lower()
    return any(word in low for word in SECRET_WORDS)


def redact(value: Any) -> Any:
    """``value`` with every non-empty value under a secret-looking key replaced
    by :data:`REDACTED` (an empty one shows the secret is unset)."""
    if isinstance(value, Mapping):
        return {k: (REDACTED if _secret_name(str(k)) and v not in ("", None) else redact(v))
                for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value


def _redact_args(args: Sequence[str]) -> str:
    """A command line with the values of secret-looking flags hidden
    (``--password x``, ``--token=x``)."""
    out, hide_next = [], False
    for arg in args:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
        elif arg.startswith("-") and _secret_name(arg):
            flag, eq, _value = arg.partition("=")
            out.append(f"{flag}={REDACTED}" if eq else arg)
            hide_next = not eq
        else:
            out.append(arg)
    return " ".join(out)


# A process name or argument may hold any byte but NUL (`sh -c` scripts hold
# newlines; seen in CI), and a file name any but NUL and '/': one entry must
# stay one line, so control characters are written as Python escapes.
_CONTROL_ESCAPES = {c: repr(chr(c))[1:-1] for c in (*range(0x20), 0x7F)}


def _one_line(text: str) -> str:
    return text.translate(_CONTROL_ESCAPES)


def _utc(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


__all__ = [
    "ALL_TYPES", "COMPRESSIONS", "FILE_NAMES", "MAX_FS_ENTRIES", "REDACTED", "SnapshotInputs", "SnapshotRefused",
    "SnapshotRequest", "TYPES", "build_snapshot", "inputs_from_broker", "plain_data", "redact",
    "request_from_codes", "request_from_names",
]
