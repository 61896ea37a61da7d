"""Extract the code blocks of docs/*.md that are marked for testing (see test_doc_blocks.py).

Pure text handling, no I/O beyond reading the pages: the tests and their ids are built
from what this returns at collection time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

# `<!-- test: NAME [slow] [spark] [runs-with=SPEC] [after=NAME] -->`, alone on the line
# right before the opening fence.
MARKER = re.compile(r"^<!--\s*test:\s*(?P<name>[a-z0-9][a-z0-9-]*)(?P<opts>[^>]*?)\s*-->\s*$")
FENCE = re.compile(r"^```(?P<lang>[a-z]*)\s*$")
PRINTS = re.compile(r"#\s*prints:\s*(?P<text>.+?)\s*$")
# `pip install a b==1` in a comment: the install line a reader follows. Tokens that look
# like requirements are checked against the interpreter that runs the block.
PIP_INSTALL = re.compile(r"pip install (?P<args>[^#(]+)")
REQUIREMENT = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9_.-]*)(==(?P<version>[A-Za-z0-9_.]+))?$")
FLAGS = {"slow", "spark"}  # become pytest markers of the same names (pyproject [tool.pytest] markers)
LANGS = {"python", "sh"}


class DocBlockError(ValueError):
    """A marked block that the runner cannot run as written (the message says where)."""


@dataclass(frozen=True)
class Block:
    name: str
    page: str  # docs/<page>.md, relative to the repo
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    flags: frozenset[str] = frozenset()
    runs_with: str | None = None  # a client venv's spec, e.g. "apache-iggy==0.9.0"
    after: str | None = None  # the block whose message this one reads back
    prints: tuple[str, ...] = ()
    installs: tuple[tuple[str, str | None], ...] = field(default=())

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def _options(text: str, where: str) -> dict:
    opts: dict = {"flags": set()}
    for word in text.split():
        key, eq, value = word.partition("=")
        if not eq and key in FLAGS:
            opts["flags"].add(key)
        elif eq and key in ("runs-with", "after") and value:
            opts[key.replace("-", "_")] = value
        else:
            raise DocBlockError(f"{where}: unknown test marker option {word!r} "
                                f"(flags {sorted(FLAGS)}, runs-with=SPEC, after=NAME)")
    return opts


def _installs(code: str) -> tuple[tuple[str, str | None], ...]:
    found = []
    for line in code.splitlines():
        comment = line.partition("#")[2] if not line.lstrip().startswith("pip ") else line
        for m in PIP_INSTALL.finditer(comment):
            for token in m.group("args").split():
                req = REQUIREMENT.match(token)
                if req is None:
                    break  # past the requirements (a path such as '.[spark]', or prose)
                found.append((req.group("name"), req.group("version")))
    return tuple(found)


def parse_page(path: Path) -> list[Block]:
    """The marked blocks of one page, in order."""
    rel = path.relative_to(ROOT).as_posix()
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks = []
    for i, line in enumerate(lines):
        marker = MARKER.match(line)
        if marker is None:
            continue
        where = f"{rel}:{i + 1}"
        fence = FENCE.match(lines[i + 1]) if i + 1 < len(lines) else None
        if fence is None or fence.group("lang") not in LANGS:
            raise DocBlockError(f"{where}: a test marker must stand right before a ```python or ```sh fence")
        try:
            end = next(j for j in range(i + 2, len(lines)) if lines[j].strip() == "```")
        except StopIteration:
            raise DocBlockError(f"{where}: the marked block has no closing fence") from None
        code = "\n".join(lines[i + 2:end]) + "\n"
        opts = _options(marker.group("opts"), where)
        blocks.append(Block(name=marker.group("name"), page=rel, line=i + 2, lang=fence.group("lang"), code=code,
                            flags=frozenset(opts["flags"]), runs_with=opts.get("runs_with"),
                            after=opts.get("after"),
                            prints=tuple(m.group("text") for m in map(PRINTS.search, code.splitlines()) if m),
                            installs=_installs(code)))
    return blocks


def all_blocks(docs: Path = DOCS) -> list[Block]:
    """Every marked block of docs/*.md; names must be unique and ``after`` must name one."""
    blocks = [b for page in sorted(docs.glob("*.md")) for b in parse_page(page)]
    seen: dict[str, Block] = {}
    for b in blocks:
        if b.name in seen:
            raise DocBlockError(f"{b.where}: test name {b.name!r} is used at {seen[b.name].where} already")
        seen[b.name] = b
    for b in blocks:
        if b.after is not None and b.after not in seen:
            raise DocBlockError(f"{b.where}: after={b.after} names no marked block")
    return blocks
