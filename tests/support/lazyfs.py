"""A FUSE filesystem that forgets, at a simulated power cut, everything not yet fsynced.

``kill -9`` of a process leaves the kernel's page cache alone, so it cannot show that an
acknowledged write survives a power cut. This filesystem can (in the spirit of LazyFS,
https://github.com/dsrhaslab/lazyfs, and of the "strict" ext4 model of the
crash-consistency literature, e.g. ALICE, Pillai et al., OSDI 2014).

Model (chosen because it is the weakest that POSIX allows, so code that survives it
survives every real filesystem that keeps POSIX's promises):

- **File data.** ``write`` and ``truncate`` change only a file's *current* content (what
  reads, ``stat`` and ``mmap`` see: the page cache). ``fsync`` / ``fdatasync`` copy the
  current content and size to the file's *durable* content. A new file's durable content
  is empty.
- **Directory entries.** ``create``, ``mkdir``, ``unlink``, ``rmdir`` and ``rename`` change
  only a directory's *current* entries. Its *durable* entries become the current ones
  when that directory itself is fsynced (FUSE ``fsyncdir``; fsync(2) NOTES: "Calling
  fsync() does not necessarily ensure that the entry in the directory containing the
  file has also reached disk. For that an explicit fsync() on a file descriptor for the
  directory is also needed"). An fsync of a file does **not** persist its name (ext4
  in its default data=ordered mode happens to, which is why bugs of this kind hide).
  A rename touches two directories; each side persists with its own directory's fsync.
- **Crash.** The durable tree (root's durable entries, recursively, each file's durable
  content) is written over the backing directory, which is then exactly a disk after
  the power cut; the process exits without serving anything more. A clean unmount
  writes the current tree instead (a clean shutdown syncs everything).

The whole tree is held in memory, loaded from the backing directory at start (test data
directories are a few MB). Inode identity is kept, so a file renamed or unlinked while
open keeps its content, and ``fsync`` of an unlinked-but-open file is harmless. Extended
attributes, hard links and symlinks are not offered (Ferry and SQLite use none).

Run: ``python tests/support/lazyfs.py BACKING MOUNT`` (foreground). It prints ``ready``
once mounted; a line ``crash`` on its stdin does the power cut (prints ``crashed``, then
exits); unmounting (``fusermount -u MOUNT``) is the clean shutdown. :class:`LazyFS` is the
controller tests use.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

START_LIMIT_S = 20  # a mount not up by then is a failure (guard against a hang, not a threshold)
# FUSE's default (libfuse2) splits writes into 4 KiB requests; segment writes are larger,
# and each request is a Python call here. 128 KiB is the most the kernel sends in one.
MAX_WRITE = 128 * 1024
_DEBUG = bool(os.environ.get("LAZYFS_DEBUG"))  # every operation to stderr


def unavailable() -> str | None:
    """Why a lazyfs mount cannot run here, or None when it can."""
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse (FUSE is not available in this machine or container)"
    if shutil.which("fusermount") is None and shutil.which("fusermount3") is None:
        return "no fusermount (apt-get install fuse3)"
    try:
        import fuse  # noqa: F401
    except (ImportError, OSError) as exc:  # fusepy raises OSError (EnvironmentError) without libfuse2
        return f"fusepy cannot load libfuse2 (pip install fusepy; apt-get install libfuse2): {exc}"
    if os.geteuid() != 0 and not os.access("/dev/fuse", os.R_OK | os.W_OK):
        return "/dev/fuse is not accessible to this user"
    return None


# -- the filesystem (runs in its own process) -------------------------------------------
class _Node:
    __slots__ = ("ino", "mode", "cur", "dur", "dirty_from", "mtime")

    def __init__(self, ino: int, mode: int, cur, dur) -> None:
        self.ino = ino
        self.mode = mode
        self.cur = cur  # bytearray (file) or dict name -> _Node (directory): the page-cache view
        self.dur = dur  # the same, as a disk would hold it after a power cut
        self.dirty_from: int | None = None  # files: lowest byte changed since the last fsync
        self.mtime = time.time_ns()

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.mode)


def _load(path: Path, counter: list[int]) -> _Node:
    st = os.lstat(path)
    counter[0] += 1
    ino = counter[0]
    if stat.S_ISDIR(st.st_mode):
        entries = {p.name: _load(p, counter) for p in path.iterdir()}
        return _Node(ino, st.st_mode, entries, dict(entries))
    if not stat.S_ISREG(st.st_mode):
        raise SystemExit(f"lazyfs: {path} is neither a file nor a directory")
    data = path.read_bytes()
    return _Node(ino, st.st_mode, bytearray(data), bytearray(data))


def _write_tree(node: _Node, path: Path, durable: bool, seen: frozenset[int]) -> None:
    """Write ``node`` (its durable or current state) at ``path`` of a real filesystem."""
    if node.is_dir:
        path.mkdir()
        # A cycle is possible only in the durable tree (a directory moved under its own
        # old child, with different directories synced); it ends there.
        for name, child in (node.dur if durable else node.cur).items():
            if child.ino not in seen:
                _write_tree(child, path / name, durable, seen | {child.ino})
    else:
        path.write_bytes(node.dur if durable else node.cur)
    os.chmod(path, stat.S_IMODE(node.mode))


def _operations_class():
    from fuse import FuseOSError, Operations

    def fail(code: int):
        return FuseOSError(code)

    class LazyOps(Operations):
        use_ns = True

        def __init__(self, backing: Path) -> None:
            self.backing = backing
            self._inos = [0]
            self.root = _load(backing, self._inos)
            self.handles: dict[int, _Node] = {}  # fh -> node (survives unlink and rename)
            self._next_fh = 0
            self._mutex = threading.Lock()  # the crash thread against the FUSE loop (not "lock": a FUSE operation)
            self.crashed = False

        def __call__(self, op, *args):
            with self._mutex:
                if self.crashed:
                    raise fail(errno.EIO)
                if _DEBUG:
                    try:
                        out = super().__call__(op, *args)
                    except BaseException as exc:
                        print("lazyfs", op, args[:2], "->", repr(exc), file=sys.stderr, flush=True)
                        raise
                    print("lazyfs", op, args[:2], file=sys.stderr, flush=True)
                    return out
                return super().__call__(op, *args)

        # -- lookups ---------------------------------------------------------------
        def _node(self, path: str | None, fh: int | None = None) -> _Node:
            if fh is not None and fh in self.handles:
                return self.handles[fh]
            if path is None:
                raise fail(errno.EBADF)
            node = self.root
            for part in path.strip("/").split("/"):
                if not part:
                    continue
                if not node.is_dir or part not in node.cur:
                    raise fail(errno.ENOENT)
                node = node.cur[part]
            return node

        def _parent(self, path: str) -> tuple[_Node, str]:
            head, name = os.path.split(path.rstrip("/"))
            parent = self._node(head or "/")
            if not parent.is_dir:
                raise fail(errno.ENOTDIR)
            return parent, name

        def _new(self, mode: int, is_dir: bool) -> _Node:
            self._inos[0] += 1
            if is_dir:
                return _Node(self._inos[0], stat.S_IFDIR | (mode & 0o7777), {}, {})
            return _Node(self._inos[0], stat.S_IFREG | (mode & 0o7777), bytearray(), bytearray())

        def _handle(self, node: _Node) -> int:
            self._next_fh += 1
            self.handles[self._next_fh] = node
            return self._next_fh

        # -- metadata --------------------------------------------------------------
        def init(self, path):
            print("ready", flush=True)

        def getattr(self, path, fh=None):
            node = self._node(path, fh)
            size = 4096 if node.is_dir else len(node.cur)
            nlink = 2 + sum(c.is_dir for c in node.cur.values()) if node.is_dir else 1
            return {
                "st_mode": node.mode, "st_nlink": nlink, "st_size": size, "st_ino": node.ino,
                "st_uid": os.getuid(), "st_gid": os.getgid(), "st_blocks": (size + 511) // 512,
                "st_atime": node.mtime, "st_mtime": node.mtime, "st_ctime": node.mtime,  # ns (use_ns)
            }  # fmt: skip

        def access(self, path, amode):
            self._node(path)
            return 0

        def chmod(self, path, mode):
            node = self._node(path)
            node.mode = (node.mode & ~0o7777) | (mode & 0o7777)
            return 0

        def chown(self, path, uid, gid):
            return 0

        def utimens(self, path, times=None):
            self._node(path).mtime = time.time_ns()
            return 0

        def statfs(self, path):
            blocks = 1 << 30  # 4 TiB of 4 KiB blocks: never the reason a test fails
            return {"f_bsize": 4096, "f_frsize": 4096, "f_blocks": blocks, "f_bfree": blocks,
                    "f_bavail": blocks, "f_files": 1 << 20, "f_ffree": 1 << 20, "f_namemax": 255}

        # -- directories -------------------------------------------------------------
        def readdir(self, path, fh):
            return [".", "..", *self._node(path).cur]

        def mkdir(self, path, mode):
            parent, name = self._parent(path)
            if name in parent.cur:
                raise fail(errno.EEXIST)
            parent.cur[name] = self._new(mode, True)
            return 0

        def rmdir(self, path):
            parent, name = self._parent(path)
            node = parent.cur.get(name)
            if node is None:
                raise fail(errno.ENOENT)
            if not node.is_dir:
                raise fail(errno.ENOTDIR)
            if node.cur:
                raise fail(errno.ENOTEMPTY)
            del parent.cur[name]
            return 0

        def unlink(self, path):
            parent, name = self._parent(path)
            node = parent.cur.get(name)
            if node is None:
                raise fail(errno.ENOENT)
            if node.is_dir:
                raise fail(errno.EISDIR)
            del parent.cur[name]
            return 0

        def rename(self, old, new):
            src, sname = self._parent(old)
            dst, dname = self._parent(new)
            node = src.cur.get(sname)
            if node is None:
                raise fail(errno.ENOENT)
            target = dst.cur.get(dname)
            if target is node:
                return 0
            if target is not None:
                if target.is_dir != node.is_dir:
                    raise fail(errno.EISDIR if target.is_dir else errno.ENOTDIR)
                if target.is_dir and target.cur:
                    raise fail(errno.ENOTEMPTY)
            del src.cur[sname]
            dst.cur[dname] = node
            return 0

        def fsyncdir(self, path, datasync, fh):
            node = self._node(path)
            node.dur = dict(node.cur)  # this directory's entries, as they are now, reach the disk
            return 0

        # -- files -------------------------------------------------------------------
        def create(self, path, mode, fi=None):
            parent, name = self._parent(path)
            node = parent.cur.get(name)
            if node is None:
                node = parent.cur[name] = self._new(mode, False)
            return self._handle(node)

        def open(self, path, flags):
            node = self._node(path)
            if flags & os.O_TRUNC:
                self._truncate(node, 0)
            return self._handle(node)

        def release(self, path, fh):
            self.handles.pop(fh, None)
            return 0

        def flush(self, path, fh):
            return 0  # close(2) is not a sync

        def read(self, path, size, offset, fh):
            return bytes(self._node(path, fh).cur[offset : offset + size])

        def write(self, path, data, offset, fh):
            node = self._node(path, fh)
            buf = node.cur
            if offset > len(buf):
                buf.extend(bytes(offset - len(buf)))
            buf[offset : offset + len(data)] = data
            self._dirty(node, offset)
            return len(data)

        def truncate(self, path, length, fh=None):
            self._truncate(self._node(path, fh), length)
            return 0

        def _truncate(self, node: _Node, length: int) -> None:
            if node.is_dir:
                raise fail(errno.EISDIR)
            buf = node.cur
            if length < len(buf):
                del buf[length:]
            else:
                buf.extend(bytes(length - len(buf)))
            self._dirty(node, length)

        @staticmethod
        def _dirty(node: _Node, at: int) -> None:
            node.mtime = time.time_ns()
            node.dirty_from = at if node.dirty_from is None else min(node.dirty_from, at)

        def fsync(self, path, datasync, fh):
            node = self._node(path, fh)
            if node.dirty_from is not None:
                lo = min(node.dirty_from, len(node.dur), len(node.cur))
                node.dur[lo:] = node.cur[lo:]  # below lo both were equal: copy the tail only
                node.dirty_from = None
            return 0

        # -- the end -------------------------------------------------------------------
        def write_out(self, durable: bool) -> None:
            """Make the backing directory hold the durable (crash) or current (clean) tree."""
            fresh = self.backing.with_name(self.backing.name + ".lazyfs-new")
            old = self.backing.with_name(self.backing.name + ".lazyfs-old")
            for leftover in (fresh, old):
                shutil.rmtree(leftover, ignore_errors=True)
            _write_tree(self.root, fresh, durable, frozenset({self.root.ino}))
            os.rename(self.backing, old)
            os.rename(fresh, self.backing)
            shutil.rmtree(old)

        def crash(self) -> None:
            with self._mutex:
                self.crashed = True
                self.write_out(durable=True)

    return LazyOps


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(f"usage: {argv[0]} BACKING MOUNT", file=sys.stderr)
        return 2
    from fuse import FUSE

    backing, mount = Path(argv[1]).resolve(), argv[2]
    ops = _operations_class()(backing)

    def control() -> None:
        for line in sys.stdin:
            if line.strip() == "crash":
                ops.crash()
                print("crashed", flush=True)
                os._exit(0)  # serve nothing more: the controller lazily unmounts the dead mount
        # stdin closed: the controller is gone (a test or bench killed). Unmount, so no
        # mount outlives it; the FUSE loop then returns and writes the current tree.
        subprocess.run([_fusermount(), "-u", "-z", mount], capture_output=True, check=False)

    threading.Thread(target=control, daemon=True).start()
    # nothreads: one request at a time, the model has no locking of its own beyond
    # ``_mutex``; hard_remove: unlink really unlinks (libfuse2 would rename an open file
    # to .fuse_hiddenN, an entry the model would have to persist).
    FUSE(ops, mount, foreground=True, nothreads=True, hard_remove=True, big_writes=True,
         max_write=MAX_WRITE, fsname="lazyfs", subtype="lazyfs")
    if not ops.crashed:
        ops.write_out(durable=False)
    return 0


# -- the controller (test side) ---------------------------------------------------------------
def _fusermount() -> str:
    return shutil.which("fusermount") or shutil.which("fusermount3") or "fusermount"


class LazyFS:
    """A lazyfs process over ``backing`` mounted at ``mount``: :meth:`start`, :meth:`crash`,
    :meth:`stop` (clean). Use :func:`mounted` to always clean up."""

    def __init__(self, backing: Path, mount: Path) -> None:
        self.backing = Path(backing)
        self.mount = Path(mount)
        self.proc: subprocess.Popen | None = None

    def start(self) -> "LazyFS":
        self.backing.mkdir(parents=True, exist_ok=True)
        self.mount.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [sys.executable, __file__, str(self.backing), str(self.mount)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        line = self._line()
        if line != "ready":
            err = self._finish()
            raise RuntimeError(f"lazyfs did not mount {self.mount}: {line!r} {err}")
        return self

    def _line(self) -> str:
        """The next stdout line of the process, or "" when it ended or START_LIMIT_S passed."""
        assert self.proc is not None and self.proc.stdout is not None
        got: list[str] = []
        reader = threading.Thread(target=lambda: got.append(self.proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(START_LIMIT_S)
        return got[0].strip() if got else ""

    def crash(self) -> None:
        """The power cut: everything not durable is gone from the backing directory, and
        the mount is detached. Whatever still uses the mount gets errors."""
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write("crash\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise RuntimeError(f"lazyfs is not running: {self._finish()}") from exc
        line = self._line()
        err = self._finish()
        if line != "crashed":
            raise RuntimeError(f"lazyfs did not crash cleanly: {line!r} {err}")

    def stop(self) -> None:
        """Clean unmount: the backing directory gets everything, synced or not."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            done = subprocess.run([_fusermount(), "-u", str(self.mount)], capture_output=True, check=False)
            if done.returncode:  # busy: a test left files open; detach now, end the process
                subprocess.run([_fusermount(), "-u", "-z", str(self.mount)], capture_output=True, check=False)
                self.proc.kill()
        self._finish()

    def _finish(self) -> str:
        """Wait for (or end) the process, detach the mount; returns its stderr."""
        proc, self.proc = self.proc, None
        err = ""
        if proc is not None:
            try:
                proc.wait(timeout=START_LIMIT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            err = proc.stderr.read() if proc.stderr else ""
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                try:
                    if pipe:
                        pipe.close()
                except OSError:
                    pass
        if os.path.ismount(self.mount) or _dead_mount(self.mount):
            subprocess.run([_fusermount(), "-u", "-z", str(self.mount)], capture_output=True, check=False)
        return err.strip()


def _dead_mount(path: Path) -> bool:
    try:
        os.stat(path)
        return False
    except OSError as exc:
        return exc.errno == errno.ENOTCONN  # the daemon is gone, the mount is still there


@contextmanager
def mounted(backing: Path, mount: Path) -> Iterator[LazyFS]:
    """A started :class:`LazyFS`; on exit it is unmounted cleanly unless it crashed."""
    fs = LazyFS(backing, mount).start()
    try:
        yield fs
    finally:
        fs.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
