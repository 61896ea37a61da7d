"""Run one fuzz target under atheris (libFuzzer): ``python tests/fuzz/run.py TARGET [libFuzzer args]``.

    .venv/bin/python tests/fuzz/run.py iggy_command -max_total_time=60
    .venv/bin/python tests/fuzz/run.py iggy_command -max_total_time=60 /tmp/iggy-corpus
    .venv/bin/python tests/fuzz/run.py iggy_command -max_total_time=60 --merge

The seed corpus tests/fuzz/corpus/TARGET/ and the crash inputs of
tests/fuzz/regressions/TARGET/ are copied to a temporary folder that libFuzzer
grows (or to CORPUS_COPY_DIR, the first argument that is not a flag, which is then
kept), so a run leaves the repository as it was; ``--merge`` afterwards merges the
new inputs that add coverage back into the seed corpus (libFuzzer's ``-merge=1``).
tests/fuzz/seeds.py rewrites the seed folders from scratch: regenerate first, merge after.
A crash input is written where ``-artifact_prefix`` says (default: ./crash-...);
move it to tests/fuzz/regressions/TARGET/ once the decoder is fixed.

Coverage: atheris instruments the Python bytecode of the modules imported inside
``instrument_imports`` (Ferry's ``core`` and ``adapters``, and the libraries they
parse with: h11, h2, hpack, jwt). The C extensions (Ferry's ``_speedups``, and
xxhash, crc32c, the compression codecs) run but give no coverage feedback: that
needs them built with clang's ``-fsanitize=fuzzer-no-link``, and this machine has
no clang (docs/testing.md "Fuzzing").
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
for path in (ROOT, HERE):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import atheris  # noqa: E402  (after the path set-up)

import targets  # noqa: E402  (the registry imports nothing under test)

# The packages whose bytecode gets coverage feedback (module docstring).
INSTRUMENT = ["core", "adapters", "h11", "h2", "hpack", "jwt"]


def _seed_dirs(name: str) -> list[Path]:
    return [d for d in (HERE / "corpus" / name, HERE / "regressions" / name) if d.is_dir()]


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[1] not in targets.TARGETS:
        print(f"usage: {argv[0]} TARGET [libFuzzer args] [CORPUS_COPY_DIR] [--merge]\n"
              f"targets: {', '.join(targets.TARGETS)}", file=sys.stderr)
        return 2
    name, rest = argv[1], argv[2:]
    if "--raw" in rest:  # the libFuzzer process itself (below): its arguments as given
        selves = [a[len("--self="):] for a in rest if a.startswith("--self=")]
        args = [a for a in rest if a != "--raw" and not a.startswith("--self=")]
        return _fuzz(name, [selves[0] if selves else argv[0], *args])
    merge = "--merge" in rest
    flags = [a for a in rest if a.startswith("-") and a != "--merge"]
    dirs = [a for a in rest if not a.startswith("-")]
    with tempfile.TemporaryDirectory(prefix=f"ferry-fuzz-{name}-") as tmp:
        work = Path(dirs[0]) if dirs else Path(tmp) / "corpus"
        work.mkdir(parents=True, exist_ok=True)
        for src in _seed_dirs(name):
            for f in src.iterdir():
                if f.is_file():
                    shutil.copy(f, work / f"{src.name}-{f.name}")
        # libFuzzer exits the process when it stops, so each pass is a child process.
        me = [sys.executable, str(Path(__file__).resolve()), name, "--raw"]
        rc = subprocess.run([*me, *flags, str(work)]).returncode
        if merge and rc == 0:
            # Keep only the new inputs that add coverage to the seed corpus (libFuzzer -merge=1).
            # libFuzzer's merge runs its argv[0] again as a program: give it an executable
            # shim, since this file is run by the venv's interpreter, not executed.
            shim = Path(tmp) / "fuzz-self"
            shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{Path(__file__).resolve()}" {name} --raw '
                            f'--self="$0" "$@"\n')
            shim.chmod(0o755)
            seeds = HERE / "corpus" / name
            seeds.mkdir(parents=True, exist_ok=True)
            rc = subprocess.run([str(shim), "-merge=1", str(seeds), str(work)]).returncode
        return rc


def _fuzz(name: str, args: list[str]) -> int:
    with atheris.instrument_imports(include=INSTRUMENT):
        target = targets.load(name)
    atheris.Setup(args, target)
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
