"""``ferry user``, ``perm``, ``pat`` and ``group``, and the options every admin command shares.

These commands talk to a running server through its HTTP API (gateway/remote.py;
which server and as whom: gateway/remote_target.py). Output follows ``ferry
stream list``: a table for people, ``--json`` for machines, and one line saying
what changed for the commands that change something. Names or ids are accepted
wherever a user, stream, topic or group is named (all digits = an id, from 0).
"""

from __future__ import annotations

import argparse
import json
import sys

from ..admin import AdminError, parse_duration_us, print_table, remote_session, split_address, _iso
from .admin_perm import add_perm_options, describe_permissions, permissions_body, perm_has_flags
from ..remote import path_id
from ..remote_target import admin_setup


# -- shared options ------------------------------------------------------------------------
def add_connection_options(p: argparse.ArgumentParser, *, local: bool = True, login_flags: bool = True) -> None:
    """The options that say which server (or, with ``local``, which data directory)
    and which identity. ``login_flags=False`` leaves ``--user``/``--password`` to the
    command itself (``user create NAME --password PW``); ``--login-user`` and
    ``--login-password`` always work."""
    g = p.add_argument_group("server and login (default: the running server of the config, as its root user)")
    g.add_argument("--server", metavar="URL", help="the server's HTTP API, e.g. http://127.0.0.1:3000 "
                   "(default: $FERRY_SERVER, else the config's [listeners.http], else http://127.0.0.1:3000)")
    g.add_argument("--config", metavar="FILE", help="TOML config file (default: $FERRY_CONFIG, else none)")
    g.add_argument("--token", metavar="TOKEN", help="a personal access token or JWT (default: $FERRY_TOKEN)")
    user_flags = ["--login-user"] + (["--user"] if login_flags else [])
    pass_flags = ["--login-password"] + (["--password"] if login_flags else [])
    g.add_argument(*user_flags, dest="user", metavar="NAME", help="log in as this user (default: $FERRY_USER, "
                   "else the configured root user)")
    g.add_argument(*pass_flags, dest="password", metavar="PW", help="its password (default: $FERRY_PASSWORD; "
                   "asked on a terminal)")
    if local:
        g.add_argument("--local", action="store_true", help="open the data directory instead of talking to a "
                       "server (the config's server.data_dir, relative to the config file)")
        g.add_argument("--data", metavar="DIR", help="with --local (implied): this data directory")


def _target(args):
    return admin_setup(args)[1]


def _out(text: str) -> None:
    sys.stdout.write(text)


def _dump(value) -> None:
    _out(json.dumps(value) + "\n")


def _ident(text: str) -> int | str:
    return int(text) if text.isdigit() else text


# -- users -------------------------------------------------------------------------------
def _add_user(sub) -> None:
    user = sub.add_parser("user", help="list, create, delete and (de)activate users; change passwords")
    usub = user.add_subparsers(dest="action", required=True,
                               metavar="{list,create,delete,passwd,activate,deactivate}")
    p = usub.add_parser("list", help="list users")
    p.add_argument("--json", action="store_true", help="one JSON array instead of a table")
    add_connection_options(p, local=False)
    p = usub.add_parser("create", help="create a user (no permissions unless given)")
    p.add_argument("name")
    p.add_argument("--password", dest="new_password", required=True, metavar="PW", help="the new user's password")
    p.add_argument("--inactive", action="store_true", help="create it deactivated (it cannot log in)")
    add_perm_options(p)
    add_connection_options(p, local=False, login_flags=False)
    p = usub.add_parser("delete", help="delete a user and its tokens")
    p.add_argument("name", metavar="USER", help="name or id")
    add_connection_options(p, local=False)
    p = usub.add_parser("passwd", help="change a user's password (Iggy asks for the current one)")
    p.add_argument("name", metavar="USER", help="name or id")
    p.add_argument("--current", metavar="PW", help="the current password (asked on a terminal)")
    p.add_argument("--new", metavar="PW", help="the new password (asked on a terminal)")
    add_connection_options(p, local=False, login_flags=False)
    for action in ("activate", "deactivate"):
        p = usub.add_parser(action, help=f"{action} a user ({'allows' if action == 'activate' else 'refuses'} "
                            "new logins; live sessions go on)")
        p.add_argument("name", metavar="USER", help="name or id")
        add_connection_options(p, local=False)
    for p in usub.choices.values():
        p.set_defaults(func=cmd_user)


def _ask(flag: str, value: str | None, prompt: str) -> str:
    if value is not None:
        return value
    if not sys.stdin.isatty():
        raise AdminError(f"{flag} is required (no terminal to ask on)")
    import getpass

    return getpass.getpass(prompt)


def cmd_user(args) -> int:
    target = _target(args)
    with remote_session(target) as client:
        if args.action == "list":
            users = client.call("GET", "/users")
            if args.json:
                _dump(users)
            else:
                print_table([[u["id"], u["username"], u["status"], _iso(u["created_at"])] for u in users],
                            ["ID", "USERNAME", "STATUS", "CREATED"], sys.stdout)
            return 0
        if args.action == "create":
            body = {"username": args.name, "password": args.new_password,
                    "status": "inactive" if args.inactive else "active",
                    "permissions": permissions_body(client, args) if perm_has_flags(args) else None}
            user = client.call("POST", "/users", body)
            _out(f"created user {user['username']!r} with id {user['id']} ({user['status']})\n")
            return 0
        user = client.call("GET", f"/users/{path_id(_ident(args.name))}")
        where = f"/users/{user['id']}"
        if args.action == "delete":
            client.call("DELETE", where)
            _out(f"deleted user {user['username']!r} (id {user['id']})\n")
        elif args.action == "passwd":
            current = _ask("--current", args.current, f"current password of {user['username']}: ")
            new = _ask("--new", args.new, f"new password of {user['username']}: ")
            client.call("PUT", where + "/password", {"current_password": current, "new_password": new})
            _out(f"changed the password of user {user['username']!r}\n")
        else:
            status = "active" if args.action == "activate" else "inactive"
            client.call("PUT", where, {"status": status})
            _out(f"user {user['username']!r} is now {status}\n")
    return 0


# -- permissions -------------------------------------------------------------------------
def _add_perm(sub) -> None:
    perm = sub.add_parser("perm", help="show or set a user's permissions (Iggy's global, stream and topic flags)")
    psub = perm.add_subparsers(dest="action", required=True, metavar="{show,set}")
    p = psub.add_parser("show", help="print a user's permissions")
    p.add_argument("name", metavar="USER", help="name or id")
    p.add_argument("--json", action="store_true", help="the permissions as the HTTP API's JSON")
    add_connection_options(p, local=False)
    p = psub.add_parser("set", help="replace a user's permissions with the flags given",
                        description="Replace USER's permissions (Iggy's UpdatePermissions replaces them all). "
                                    "Flags are comma-separated; 'all' sets every flag of that level, 'none' none.")
    p.add_argument("name", metavar="USER", help="name or id")
    add_perm_options(p)
    add_connection_options(p, local=False)
    for p in psub.choices.values():
        p.set_defaults(func=cmd_perm)


def cmd_perm(args) -> int:
    target = _target(args)
    with remote_session(target) as client:
        user = client.call("GET", f"/users/{path_id(_ident(args.name))}")
        if args.action == "show":
            if args.json:
                _dump({"user_id": user["id"], "username": user["username"], "permissions": user.get("permissions")})
            else:
                _out(describe_permissions(client, user))
            return 0
        if not perm_has_flags(args):
            raise AdminError("perm set: give --global, --stream or --topic (--global none clears everything)")
        client.call("PUT", f"/users/{user['id']}/permissions", {"permissions": permissions_body(client, args)})
        _out(f"set the permissions of user {user['username']!r}\n")
        _out(describe_permissions(client, client.call("GET", f"/users/{user['id']}")))
    return 0


# -- personal access tokens -----------------------------------------------------------------
def _add_pat(sub) -> None:
    pat = sub.add_parser("pat", help="list, create and delete your personal access tokens")
    tsub = pat.add_subparsers(dest="action", required=True, metavar="{list,create,delete}")
    p = tsub.add_parser("list", help="list the logged-in user's tokens (names and expiry; never the tokens)")
    p.add_argument("--json", action="store_true", help="one JSON array instead of a table")
    p = tsub.add_parser("create", help="create a token and print it (the only time it is shown)")
    p.add_argument("name")
    p.add_argument("--expiry", metavar="DURATION", help="lifetime (90s, 15m, 2h, 7d; default: never expires)")
    p = tsub.add_parser("delete", help="delete a token (new logins with it are refused)")
    p.add_argument("name")
    for p in tsub.choices.values():
        add_connection_options(p, local=False)
        p.set_defaults(func=cmd_pat)


def cmd_pat(args) -> int:
    expiry = parse_duration_us(args.expiry) if getattr(args, "expiry", None) else None
    target = _target(args)
    with remote_session(target) as client:
        if args.action == "list":
            tokens = client.call("GET", "/personal-access-tokens")
            if args.json:
                _dump(tokens)
            else:
                print_table([[t["name"], _iso(t["expiry_at"]) if t.get("expiry_at") else "never"] for t in tokens],
                            ["NAME", "EXPIRES"], sys.stdout)
        elif args.action == "create":
            body = {"name": args.name} if expiry is None else {"name": args.name, "expiry": expiry}
            token = client.call("POST", "/personal-access-tokens", body)["token"]
            _out(token + "\n")  # alone on stdout: TOKEN=$(ferry pat create ci)
            print(f"ferry: personal access token {args.name!r} created; it is shown only this once "
                  "(use it with --token or FERRY_TOKEN)", file=sys.stderr)
        else:
            client.call("DELETE", f"/personal-access-tokens/{path_id(args.name)}")
            _out(f"deleted personal access token {args.name!r}\n")
    return 0


# -- consumer groups -----------------------------------------------------------------------
def _add_group(sub) -> None:
    group = sub.add_parser("group", help="list (with lag), create and delete consumer groups of a topic")
    gsub = group.add_subparsers(dest="action", required=True, metavar="{list,create,delete}")
    p = gsub.add_parser("list", help="a topic's consumer groups: members and lag per partition",
                        description="Lag = the partition's current (last) offset - the group's stored offset; "
                                    "with nothing stored, every message of the partition. Stored group offsets "
                                    "come over the Iggy TCP listener of the same config (HTTP has no route for "
                                    "them).")
    p.add_argument("address", metavar="STREAM/TOPIC")
    p.add_argument("--json", action="store_true", help="one JSON array instead of a table")
    p = gsub.add_parser("create", help="create a consumer group")
    p.add_argument("address", metavar="STREAM/TOPIC")
    p.add_argument("name")
    p.add_argument("--id", type=int, dest="group_id", help="explicit id (default: next free)")
    p = gsub.add_parser("delete", help="delete a consumer group and its stored offsets")
    p.add_argument("address", metavar="STREAM/TOPIC")
    p.add_argument("name", help="name or id")
    for p in gsub.choices.values():
        add_connection_options(p, local=False)
        p.set_defaults(func=cmd_group)


def cmd_group(args) -> int:
    stream, topic = split_address(args.address)
    target = _target(args)
    base = f"/streams/{path_id(stream)}/topics/{path_id(topic)}/consumer-groups"
    with remote_session(target) as client:
        if args.action == "create":
            body = {"name": args.name}
            if args.group_id is not None:
                body["group_id"] = args.group_id
            g = client.call("POST", base, body)
            _out(f"created consumer group {g['name']!r} with id {g['id']} on {args.address}\n")
        elif args.action == "delete":
            g = client.call("GET", f"{base}/{path_id(_ident(args.name))}")
            client.call("DELETE", f"{base}/{g['id']}")
            _out(f"deleted consumer group {g['name']!r} (id {g['id']}) of {args.address}\n")
        else:
            from .admin_group import group_rows, print_groups

            groups = group_rows(client, target, stream, topic, base)
            print_groups(groups, args.json, sys.stdout)
    return 0


def add_parsers(sub) -> None:
    """Add ``user``, ``perm``, ``pat``, ``group`` and ``snapshot`` to the ``ferry`` parser's subparsers."""
    _add_user(sub)
    _add_perm(sub)
    _add_pat(sub)
    _add_group(sub)
    from .snapshot import add_parser as add_snapshot

    add_snapshot(sub, add_connection_options)


__all__ = ["add_connection_options", "add_parsers", "cmd_group", "cmd_pat", "cmd_perm", "cmd_user"]
