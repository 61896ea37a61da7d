"""``ferry config sample [FILE]`` and ``ferry config check [FILE]``.

``sample`` writes a commented ferry.toml *generated* from the key table
(gateway/config.py ``SECTIONS``, ``LISTENER_KEYS``, the listener registry's
options and gateway/confkeys.py's meanings), so it cannot drift from what the
loader accepts: every key appears with its meaning, bounds, environment
variable, flag and default, the assignments commented out, so the file as
written loads to exactly the defaults.

``check`` runs the loader ``ferry serve`` runs (same file, variables and
flags, same one-line error and exit 2) and prints the effective value of
every key with where it came from: ``default``, ``file NAME``, ``env
FERRY_...`` or ``flag --...``; ``--json`` for scripts.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any, Mapping

from .. import version
from ..confkeys import BINDING_FIELDS, SECRET_SHOWN, MiB, KiB, Key, is_secret
from ..config import (
    LISTENER_KEYS,
    SECTIONS,
    Path_,
    Resolved,
    dotted,
    env_name,
    resolve_config,
    schema_for,
)
from ..registry import Registry, default_registry
from .exits import EXIT_CANNOT_START, EXIT_FAILED
from .serve import serve_flags

# Secrets (confkeys.is_secret) show as "<set>" with their source, never their value.
HIDDEN = SECRET_SHOWN
# Keys the sample sets (not commented out): `ferry stream list --local --config ferry.toml`
# needs a data directory, relative to the file's own directory (docs/cli.md).
ACTIVE_KEYS = frozenset({("server", "data_dir")})
# Serve flags that set several keys at once; the sample names them in its header.
MULTI_KEY_FLAGS = ("--only", "--disable")
_EXAMPLE_KEY = Key("str", "")  # formats the [[binding]] example's values


def add_parsers(sub) -> None:
    """Add ``config sample|check`` to the ``ferry`` parser's subparsers.

    Called by gateway.cli.ferry.build_parser after ``serve`` exists: ``check``
    takes serve's flags (copied from its parser), so it judges exactly what
    ``ferry serve`` with the same arguments would run."""
    serve = sub.choices["serve"]
    config = sub.add_parser("config", help="write a commented sample ferry.toml, or check one",
                            description="Generate or check the configuration (docs/configuration.md).")
    csub = config.add_subparsers(dest="action", required=True, metavar="{sample,check}")
    p = csub.add_parser("sample", help="write a commented ferry.toml: every key at its default",
                        description="Write a commented ferry.toml listing every key with its meaning, "
                                    "variable, flag and default (commented out: the file as is changes nothing).")
    p.add_argument("file", nargs="?", default="-", metavar="FILE", help="where to write it (default: stdout)")
    p.add_argument("--force", action="store_true", help="overwrite FILE if it exists")
    p.set_defaults(func=cmd_sample, serve_parser=serve)
    # parents= copies serve's options (and its defaults, func included: set again
    # below); "resolve" lets serve's -h replace ours instead of clashing.
    p = csub.add_parser("check", parents=[serve], conflict_handler="resolve", add_help=False,
                        help="validate a config and print every effective value with its source",
                        description="Validate the configuration `ferry serve` would run with these "
                                    "arguments (FILE, FERRY_* variables, flags) and print every value "
                                    "with its source. Exit 2 with one line on a bad configuration.")
    p.add_argument("file", nargs="?", metavar="FILE", help="the TOML file (default: --config, else $FERRY_CONFIG)")
    p.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    p.set_defaults(func=cmd_check)


# -- which flag sets which key -------------------------------------------------
def flags_by_key(serve: argparse.ArgumentParser, registry: Registry) -> dict[Path_, str]:
    """``{key path: "--flag"}`` for serve's single-key flags, found by asking
    gateway.cli.serve.serve_flags what each flag sets (so a new flag shows up in the
    sample without being listed here)."""
    out: dict[Path_, str] = {}
    for action in serve._actions:
        flag = next((o for o in action.option_strings if o.startswith("--")), None)
        if flag is None or action.nargs is not None or flag in MULTI_KEY_FLAGS or action.dest in ("config", "help"):
            continue
        # A namespace as parse_args would build it, with only this flag given
        # (built by hand: parsing a probe value could exit on a typed flag).
        args = argparse.Namespace(**{a.dest: a.default for a in serve._actions if a.dest != "help"})
        setattr(args, action.dest, "1")
        for path in serve_flags(args, registry):
            out.setdefault(path, flag)
    return out


# -- sample ------------------------------------------------------------------
def toml_value(key: Key, value: Any) -> str:
    """``value`` as TOML, sizes in MiB/KiB when exact (the way people write them)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if key.kind == "size" and isinstance(value, int) and value:
        for unit, name in ((MiB, "MiB"), (KiB, "KiB")):
            if value % unit == 0:
                return json.dumps(f"{value // unit}{name}")
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(json.dumps(v) for v in value) + "]"
    return json.dumps(str(value))  # JSON string escapes are valid TOML basic strings


def _bounds(key: Key) -> str:
    if key.kind == "choice":
        return "one of " + ", ".join(key.choices)
    if key.kind == "size":
        return "bytes, or a size like \"64KiB\""
    if key.kind == "str" and key.lo is not None and key.hi is not None:
        return f"{key.lo:g}..{key.hi:g} bytes"
    if key.kind == "int" and key.lo is not None and key.hi is not None:
        return f"{int(key.lo)}..{int(key.hi)}"
    if key.kind == "float" and key.lo is not None and key.hi is not None:
        return f"{key.lo:g}..{key.hi:g}"
    if key.kind == "port":
        return "0..65535, 0 = any free port"
    return ""


def _key_lines(path: Path_, key: Key, flags: Mapping[Path_, str], default_host: str) -> list[str]:
    how = [env_name(path)] + ([flags[path]] if path in flags else [])
    doc = key.doc + (f" ({_bounds(key)})" if _bounds(key) else "")
    # A listener's host is unset by default and follows server.host: the line
    # shows server.host's default, so uncommenting it changes nothing either.
    default = default_host if key.default is None else key.default
    active = "" if path in ACTIVE_KEYS else "#"
    return [f"# {doc}  [{', '.join(how)}]", f"{active}{path[-1]} = {toml_value(key, default)}"]


def sample_toml(registry: Registry | None = None, flags: Mapping[Path_, str] | None = None) -> str:
    """The commented sample configuration (every key of the schema, defaults
    commented out), as text. Loading it as is gives exactly the defaults."""
    registry = registry or default_registry()
    known = registry.known()
    schema = schema_for(known)
    flags = flags or {}
    default_host = SECTIONS["server"]["host"].default
    out = [
        f"# ferry.toml, written by `ferry config sample` (ferry {version()}).",
        "#",
        "# Every key is listed with its meaning, [its FERRY_* variable and `ferry serve` flag],",
        "# and its default, commented out, except server.data_dir (\"data\" next to this file, which",
        "# `ferry ... --local --config ferry.toml` needs). Uncomment",
        "# a line and edit it to change that key. For every key the first of these wins:",
        "# a flag, a FERRY_* variable, this file, the default. --only NAME,NAME and",
        "# --disable NAME choose listeners from the command line. docs/configuration.md",
        "# has the details; `ferry config check ferry.toml` validates this file and shows",
        "# where each value comes from.",
    ]
    for section in SECTIONS:
        out += ["", f"[{section}]"]
        for name in SECTIONS[section]:
            out += [""] + _key_lines((section, name), schema[(section, name)], flags, default_host)
    out += ["", "# -- listeners: one [listeners.<name>] table each " + "-" * 30,
            "# Every listener has enabled, host and port; some have options of their own."]
    for lname, kl in known.items():
        about = kl.spec.description if kl.spec is not None and kl.spec.description else "not available in this build"
        out += ["", f"[listeners.{lname}]", f"# {about}; default port {kl.default_port}/{kl.transport}"]
        for name in [*LISTENER_KEYS, *kl.options]:
            path = ("listeners", lname, name)
            out += _key_lines(path, schema[path], flags, default_host)
    out += ["", "# -- [[binding]]: explicit protocol names for one topic (docs/addressing.md) " + "-" * 3,
            "# Repeat the table for more topics; bindings have no variables or flags. Example:", "#",
            "#[[binding]]"]
    for name, (example, doc) in BINDING_FIELDS.items():
        line = f"#{name} = {toml_value(_EXAMPLE_KEY, example)}"
        out.append(f"{line:<32} # {doc}")
    return "\n".join(out) + "\n"


def cmd_sample(args: argparse.Namespace) -> int:
    registry = default_registry()
    text = sample_toml(registry, flags_by_key(args.serve_parser, registry))
    if args.file == "-":
        sys.stdout.write(text)
        return 0
    target = Path(args.file)
    if target.exists() and not args.force:
        print(f"ferry: error: {target} exists; pass --force to overwrite it", file=sys.stderr)
        return EXIT_FAILED
    try:
        target.write_text(text)
    except OSError as exc:
        print(f"ferry: error: cannot write {target}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_FAILED
    print(f"wrote {target}: every key at its default, commented out; check it with "
          f"`ferry config check {target}`", file=sys.stderr)
    return 0


# -- check -------------------------------------------------------------------
def _effective(resolved: Resolved, path: Path_) -> Any:
    value = resolved.values[path]
    if value is None and path[0] == "listeners" and path[2] == "host":
        return resolved.config.listener(path[1]).host
    return value


def effective_rows(resolved: Resolved) -> list[dict[str, Any]]:
    """One row per key: ``key``, ``value`` (a secret that is set shows as
    ``<set>``, even at its public default), ``source`` (default/file/env/flag), ``from`` (the file,
    variable or flag; None for a default) and ``env`` (the key's variable)."""
    rows = []
    for path, key in resolved.schema.items():
        value = _effective(resolved, path)
        kind, name = resolved.source_of(path)
        if is_secret(path) and value:
            value = HIDDEN
        rows.append({"key": dotted(path), "value": value, "source": kind, "from": name or None,
                     "env": env_name(path)})
    return rows


def _json_value(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple):
        return list(value)
    return value


def _binding_dicts(resolved: Resolved) -> list[dict[str, Any]]:
    return [{f.name: getattr(b, f.name) for f in fields(b)} for b in resolved.config.bindings]


def check_report(resolved: Resolved, as_json: bool) -> str:
    """The text (or JSON) ``ferry config check`` prints for a valid configuration."""
    cfg = resolved.config
    rows = effective_rows(resolved)
    warnings = []
    if cfg.auth.uses_default_password:
        warnings.append("auth.root_password is the public default: set it in the file "
                        f"or {env_name(('auth', 'root_password'))} before exposing this server")
    if as_json:
        doc = {"file": str(cfg.source) if cfg.source else None, "valid": True, "version": version(),
               "keys": {r["key"]: {k: _json_value(v) for k, v in r.items() if k != "key"} for r in rows},
               "bindings": _binding_dicts(resolved),
               "enabled_listeners": [lc.name for lc in cfg.enabled_listeners()],
               "warnings": warnings}
        return json.dumps(doc, indent=2) + "\n"
    shown = [(r["key"], toml_value(resolved.schema[_split(r["key"])], r["value"]) if r["value"] != HIDDEN else HIDDEN,
              r["source"] + (f" {r['from']}" if r["from"] else "")) for r in rows]
    kw = max(len(k) for k, _, _ in shown)
    vw = min(max(len(v) for _, v, _ in shown), 40)
    what = f"{cfg.source}" if cfg.source else "no config file (defaults, FERRY_* variables, flags)"
    lines = [f"{what}: valid", "", f"{'key':<{kw}}  {'value':<{vw}}  source"]
    lines += [f"{k:<{kw}}  {v:<{vw}}  {s}" for k, v, s in shown]
    lines.append("")
    lines.append(f"bindings: {len(cfg.bindings)}")
    for b in _binding_dicts(resolved):
        lines.append("  " + ", ".join(f"{k} = {v!r}" for k, v in b.items() if v is not None))
    enabled = [f"{lc.name} {lc.port}/{lc.transport}" for lc in cfg.enabled_listeners()]
    lines.append(f"enabled listeners: {', '.join(enabled) or 'none'}")
    lines += [f"warning: {w}" for w in warnings]
    return "\n".join(lines) + "\n"


def _split(key: str) -> Path_:
    return tuple(key.split("."))


def cmd_check(args: argparse.Namespace) -> int:
    registry = default_registry()
    if args.file and args.config and args.file != args.config:
        print(f"ferry: error: two config files given ({args.file} and --config {args.config})", file=sys.stderr)
        return EXIT_CANNOT_START
    resolved = resolve_config(args.file or args.config, flags=serve_flags(args, registry), registry=registry)
    sys.stdout.write(check_report(resolved, args.json))
    return 0


__all__ = ["add_parsers", "check_report", "effective_rows", "flags_by_key", "sample_toml", "toml_value"]
