"""The documentation's code blocks, run as a reader would run them, against a live gateway.

Convention (docs/quickstart.md "Tests" points here):

- A block is tested when the line right before its opening fence is an HTML comment
  ``<!-- test: NAME [slow] [spark] [runs-with=SPEC] [after=NAME] -->``. Rendered Markdown
  hides it; the source shows it. Only ```` ```python ```` and ```` ```sh ```` blocks.
- ``# prints: TEXT`` comments in the block say what it prints: each TEXT must appear in
  its standard output. Every tested block has at least one (the docs say what a reader sees).
- Every block runs **twice in a row**, both runs must exit 0 and print what it says: a
  reader may run a quick start twice, or after another quick start that created the same
  topic. All blocks share one gateway (tests/docs/conftest.py), in page order.
- python blocks run with this suite's interpreter (.venv/bin/python), or with
  ``runs-with=SPEC``: the client venv the other tests use for that client (apache-iggy==0.9.0
  from tests/support/iggy_clients.py, pravega==0.3.8 from tests/support/pravega_clients.py).
  sh blocks run with ``bash -e -o pipefail``, PATH starting with .venv/bin (so ``ferry``,
  ``python3`` and ``pip`` are the venv's).
- Install lines are not executed (they would need the network and could change the venvs);
  instead every requirement a ``pip install`` comment names (``nats-py``, ``apache-iggy==0.9.0``)
  must be installed, at that version, in the interpreter that runs the block, so a reader
  who follows the line gets what the block was tested with.
- Ports: blocks read the listeners' addresses from NATS_URL, NATS_WS_URL, NATS_MONITOR_URL,
  IGGY_TCP, IGGY_WS, IGGY_HTTP, PRAVEGA_CONTROLLER and KAFKA_BOOTSTRAP (docs/quickstart.md), falling back to the
  default ports; the test sets them to the test gateway's free ports. A line naming a default
  port must also name one of these variables (else the block would talk to whatever gateway
  runs on that port on this machine, not the test's). The admin commands (``ferry stream
  create ...``) name no port: they read FERRY_SERVER (docs/quickstart.md "Admin commands"),
  which the test sets to the gateway's HTTP listener, so they run as pasted.
- ``after=NAME``: the block reads back what block NAME wrote (the first-hour walkthrough).
  NAME runs first, then this block twice; its output must name the same ``offset N`` as
  NAME's.
- ``slow`` and ``spark`` are the suite's pytest markers (``-m "not slow"`` skips them;
  ``make test`` runs everything).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from doc_blocks import ROOT, Block, all_blocks

BLOCKS = all_blocks()
BY_NAME = {b.name: b for b in BLOCKS}
RUN_LIMIT_S = 600  # a hung block (a Spark job, a client waiting forever) must not hang the suite
DEFAULT_PORTS = ("4222", "8443", "8222", "8090", "8092", "3000", "9090", "9092")
PORT_VARS = ("NATS_URL", "NATS_WS_URL", "NATS_MONITOR_URL", "IGGY_TCP", "IGGY_WS", "IGGY_HTTP", "PRAVEGA_CONTROLLER",
             "KAFKA_BOOTSTRAP")
OFFSET = re.compile(r"offset\W{0,3}(\d+)")
# The quick starts that must stay runnable (each has at least one tested block in its section).
QUICK_STARTS = [("docs/nats.md", "## Quick start"), ("docs/iggy.md", "## Quick start"),
                ("docs/http.md", "## Quick start"), ("docs/pravega.md", "## Quick start"),
                ("docs/spark.md", "## Quick start"), ("docs/kafka.md", "## Quick start"), ("docs/quickstart.md", "## First hour"),
                # the stream/topic block a reader pastes after `make run` (issue 28: paste-safe twice)
                ("docs/quickstart.md", "## Admin commands")]


def _params():
    return [pytest.param(b, id=b.name, marks=[getattr(pytest.mark, f) for f in sorted(b.flags)]) for b in BLOCKS]


def _ports_env(gw) -> dict[str, str]:
    p = gw.ports
    return {"NATS_URL": f"nats://127.0.0.1:{p['nats']}", "NATS_WS_URL": f"ws://127.0.0.1:{p['nats_ws']}",
            "NATS_MONITOR_URL": f"http://127.0.0.1:{p['nats_monitor']}", "IGGY_TCP": f"127.0.0.1:{p['iggy_tcp']}",
            "IGGY_WS": f"127.0.0.1:{p['iggy_ws']}", "IGGY_HTTP": f"http://127.0.0.1:{p['http']}",
            "PRAVEGA_CONTROLLER": f"tcp://127.0.0.1:{p['pravega_controller']}",
            "KAFKA_BOOTSTRAP": f"127.0.0.1:{p['kafka']}",
            # the admin commands' own variable (a client setting, not a config key: the loader skips it)
            "FERRY_SERVER": f"http://127.0.0.1:{p['http']}"}


def _interpreter(block: Block) -> str:
    if block.runs_with is None:
        return sys.executable
    if block.runs_with.startswith("pravega=="):
        import pravega_clients
        assert block.runs_with == pravega_clients.SPEC, f"{block.where}: the pravega venv holds {pravega_clients.SPEC}"
        return str(pravega_clients.client_python())
    import iggy_clients
    assert block.runs_with in iggy_clients.CLIENTS, f"{block.where}: no client venv for {block.runs_with}"
    return str(iggy_clients.client_python(block.runs_with))


def _run(block: Block, gw, workdir: Path) -> str:
    """Run the block once in ``workdir``; its stdout, or a failure that shows both streams."""
    venv_bin = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items() if not k.startswith("FERRY_")}
    env |= _ports_env(gw) | {"PATH": venv_bin + os.pathsep + env.get("PATH", ""), "PYTHONUNBUFFERED": "1",
                             # loopback only, and a quicker JVM start (test-only, as tests/spark does)
                             "SPARK_LOCAL_IP": "127.0.0.1",
                             "JAVA_TOOL_OPTIONS": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"}
    script = workdir / f"{block.name}.{'py' if block.lang == 'python' else 'sh'}"
    script.write_text(block.code)
    if block.lang == "python":
        cmd = [_interpreter(block), str(script)]
        if block.runs_with is not None:
            env["PYTHONPATH"] = ""  # a client venv must not see this checkout's packages
    else:
        cmd = ["bash", "-e", "-o", "pipefail", str(script)]
    try:
        proc = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True, timeout=RUN_LIMIT_S)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{block.where} ({block.name}) hung past {RUN_LIMIT_S} s\nstdout:\n{exc.stdout}\n"
                    f"stderr:\n{(exc.stderr or '')[-6000:]}")
    if proc.returncode != 0:
        pytest.fail(f"{block.where} ({block.name}) exited {proc.returncode}\nstdout:\n{proc.stdout}\n"
                    f"stderr:\n{proc.stderr[-6000:]}")
    missing = [text for text in block.prints if text not in proc.stdout]
    assert not missing, f"{block.where} ({block.name}) did not print {missing}\nstdout:\n{proc.stdout}"
    return proc.stdout


def _installed(python: str, name: str) -> str | None:
    probe = ("import importlib.metadata as m, sys\n"
             "try: print(m.version(sys.argv[1]))\nexcept m.PackageNotFoundError: pass\n")
    out = subprocess.run([python, "-c", probe, name], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": ""}).stdout.strip()
    return out or None


def test_marked_blocks_cover_every_quick_start():
    for page, heading in QUICK_STARTS:
        lines = (ROOT / page).read_text(encoding="utf-8").splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith(heading)) + 1
        end = next((i for i in range(start, len(lines)) if lines[i].startswith("## ")), len(lines))
        tested = [b for b in BLOCKS if b.page == page and start < b.line <= end]
        assert tested, f"{page} {heading!r} has no tested block"


@pytest.mark.parametrize("block", _params())
def test_block_says_what_it_prints_and_uses_the_port_variables(block):
    assert block.prints, f"{block.where} ({block.name}): a tested block needs a '# prints: TEXT' comment"
    for n, line in enumerate(block.code.splitlines(), block.line + 1):
        if any(re.search(rf"(127\.0\.0\.1|localhost):{port}\b", line) for port in DEFAULT_PORTS):
            assert any(var in line for var in PORT_VARS), \
                f"{block.page}:{n}: a default port without its variable ({', '.join(PORT_VARS)}): {line.strip()}"


@pytest.mark.parametrize("block", [b for b in _params() if b.values[0].installs])
def test_install_lines_name_what_the_block_runs_with(block):
    python = _interpreter(block)
    for name, version in block.installs:
        got = _installed(python, name)
        assert got is not None, f"{block.where}: '{name}' from its install line is not what the block runs with"
        if version is not None:
            assert got == version, f"{block.where}: the install line pins {name}=={version}; tested with {got}"


@pytest.mark.parametrize("block", _params())
def test_block_runs_twice(block, docs_gateway, docs_workdir):
    if block.after is not None:
        first = _run(BY_NAME[block.after], docs_gateway, docs_workdir)
        wrote = OFFSET.findall(first)
        assert wrote, f"{block.after} printed no 'offset N':\n{first}"
    for attempt in (1, 2):
        out = _run(block, docs_gateway, docs_workdir)
        if block.after is not None:
            assert OFFSET.findall(out)[-1:] == wrote[-1:], \
                f"run {attempt} of {block.name} did not read what {block.after} wrote ({wrote[-1]}):\n{out}"
