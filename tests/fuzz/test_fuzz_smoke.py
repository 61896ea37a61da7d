"""CI smoke of the fuzz targets (issue 30), without atheris: each target's function runs
over its seed corpus (tests/fuzz/corpus/<target>/), every crash input found so far
(tests/fuzz/regressions/<target>/: each must now get the protocol's own error, or be
accepted) and a few hundred inputs made from those by seeded random mutations, the
same every run. A few seconds in all; the coverage-guided runs are ``make fuzz``
(docs/testing.md "Fuzzing")."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

import targets

HERE = Path(__file__).resolve().parent
MUTATED = 200  # inputs per target beyond its files: ~0.1-0.5 s each target on the 2-core machine
_INTERESTING = (b"\x00", b"\xff", b"\x7f", b"\x80", b"\xff\xff\xff\xff", b"\x00\x00\x00\x00", b"\x7f\xff\xff\xff",
                b"\r\n", b" ", b"{", b"}", b"\"", b"\x00\x00\x10\x00")


def _files(kind: str, name: str) -> list[Path]:
    folder = HERE / kind / name
    return sorted(f for f in folder.iterdir() if f.is_file()) if folder.is_dir() else []


def _mutate(rng: random.Random, data: bytes) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(6)
        at = rng.randint(0, len(buf))
        if op == 0 and buf:
            buf[min(at, len(buf) - 1)] ^= 1 << rng.randrange(8)
        elif op == 1:
            buf[at:at] = rng.randbytes(rng.randint(1, 8))
        elif op == 2:
            del buf[at:at + rng.randint(1, 16)]
        elif op == 3:
            buf[at:at] = buf[at:at + rng.randint(1, 32)]
        elif op == 4:
            del buf[at:]
        else:
            piece = rng.choice(_INTERESTING)
            buf[at:at + len(piece)] = piece
    return bytes(buf)


def inputs(name: str) -> list[bytes]:
    """What the smoke test feeds target ``name``, in order (seeded: the same every run)."""
    seeds = [f.read_bytes() for f in _files("corpus", name)]
    crashes = [f.read_bytes() for f in _files("regressions", name)]
    rng = random.Random(f"ferry-fuzz-{name}")
    pool = seeds + crashes or [b""]
    made = [rng.randbytes(rng.randint(0, 64)) if i % 5 == 0 else _mutate(rng, rng.choice(pool))
            for i in range(MUTATED)]
    return seeds + crashes + made


@pytest.mark.parametrize("name", sorted(targets.TARGETS))
def test_target_survives_its_corpus_and_mutations(name):
    target = targets.load(name)
    for i, data in enumerate(inputs(name)):
        try:
            target(data)
        except Exception as exc:  # any escape is a crash: name the input so it can be replayed
            raise AssertionError(f"{name} crashed on input {i} ({data[:64]!r}...): {exc!r}") from exc


def test_every_target_has_seeds_and_a_runner_entry():
    for name in targets.TARGETS:
        assert _files("corpus", name), f"no seed corpus for {name}: run tests/fuzz/seeds.py"
