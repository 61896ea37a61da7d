"""nats-server config format reader and the authorization model, without sockets."""

from __future__ import annotations

import pytest

from adapters.nats.auth import AuthConfigError, covers, intersects, UserPermissions, auth_from_block, permissions_from, simple_auth
from adapters.nats.events import Connect
from adapters.nats.natsconf import NatsConfError, lookup, parse

SAMPLE = """
# nats-server style, every separator form
port: 4333
host = 127.0.0.1
max_payload 2MB
ping_interval: "2m"
debug: true, trace: off
listen: 0.0.0.0:4222   // a bare value with a colon
PASS = "s3cret"
authorization {
  timeout: 1.5
  users = [
    {user: alice, password: $PASS, permissions: {
        publish: {allow: ["orders.>", "_INBOX.>"], deny: "orders.secret"}
        subscribe: ["orders.*", "work.> workers"]
    }}
    {user: 'bob', password: "b\\"2"}
  ]
}
tls {
  cert_file: "/x/cert.pem"; key_file: "/x/key.pem"
  verify: true
}
"""


def test_sample_parses_with_types_and_variables():
    doc = parse(SAMPLE)
    assert doc["port"] == 4333 and doc["host"] == "127.0.0.1"
    assert doc["max_payload"] == 2 * 1024 * 1024 and doc["ping_interval"] == "2m"
    assert doc["debug"] is True and doc["trace"] is False
    assert doc["listen"] == "0.0.0.0:4222"
    users = doc["authorization"]["users"]
    assert users[0]["password"] == "s3cret" and users[1] == {"user": "bob", "password": 'b"2'}
    assert doc["authorization"]["timeout"] == 1.5
    assert doc["tls"] == {"cert_file": "/x/cert.pem", "key_file": "/x/key.pem", "verify": True}
    assert lookup(doc, "TLS")["verify"] is True


@pytest.mark.parametrize("text, value", [
    ("a: 1k", 1000), ("a: 1kb", 1024), ("a: 3M", 3_000_000), ("a: 1GiB", 1024**3),
    ("a: -5", -5), ("a: 2.5", 2.5), ("a: 10s", "10s"), ("a: yes", True), ("a = 'x y'", "x y"),
    ("a [1, 2\n 3]", [1, 2, 3]), ("a {}", {}), ("a: []", []),
])
def test_bare_values_are_typed_like_nats_server(text, value):
    assert parse(text)["a"] == value


def test_a_json_document_is_a_config_too():
    assert parse('{"port": 4222, "authorization": {"token": "t"}}\n') == {"port": 4222, "authorization": {"token": "t"}}
    with pytest.raises(NatsConfError):
        parse("{port: 1} x")


def test_environment_variables_resolve_after_block_variables():
    assert parse("a: $HOME_X", {"HOME_X": "/h"}) == {"a": "/h"}
    assert parse("X = 1\nb { X = 2, a: $X }\nc: $X")["b"]["a"] == 2


@pytest.mark.parametrize("text, words", [
    ("a: ", "without a value"), ("a: 'x", "unterminated string"), ("a [1, 2", "unterminated array"),
    ("a: $NOPE", "$NOPE is not defined"), ("include ./other.conf", "include is not supported"),
    ("a { b: 1 ", "unexpected 'end of file'"), ("}", "unexpected '}'"),
    ("a " + "[" * 40 + "]" * 40, "nested deeper"), ("a {b {c " + "{d " * 40, "nested deeper"),
])
def test_malformed_files_name_the_line(text, words):
    with pytest.raises(NatsConfError) as info:
        parse("\n" + text, source="f.conf")
    assert words in str(info.value) and "f.conf:2" in str(info.value)


def _conn(**kw) -> Connect:
    fields = tuple(kw)
    return Connect(**kw, fields=fields)


def test_users_and_permissions_from_block():
    auth = auth_from_block(parse(SAMPLE)["authorization"])
    assert auth.required and auth.timeout == 1.5
    perms = auth.authenticate(_conn(user="alice", password="s3cret"))
    assert isinstance(perms, UserPermissions)
    assert auth.authenticate(_conn(user="bob", password='b"2')) is True
    assert auth.authenticate(_conn(user="bob", password="nope")) is False
    assert auth.authenticate(_conn(user="mallory", password="s3cret")) is False
    assert perms.can_publish("orders.eu") and perms.can_publish("_INBOX.x.y")
    assert not perms.can_publish("orders.secret") and not perms.can_publish("billing.x")


@pytest.mark.parametrize("subject, queue, ok", [
    ("orders.eu", "", True), ("orders.*", "", True), ("orders.>", "", False), ("billing", "", False),
    ("orders.eu", "anyq", True),            # plain entry allows a queue subscription
    ("orders", "", False), ("orders.eu.x", "", False), ("work.*", "workers", True), ("work", "workers", False),
    ("work.a", "workers", True), ("work.a", "other", False), ("work.a", "", False),
])
def test_subscribe_permissions_with_queue_entries(subject, queue, ok):
    perms = permissions_from({"subscribe": ["orders.*", "work.> workers"]}, "p")
    assert perms.can_subscribe(subject, queue) is ok


@pytest.mark.parametrize("rule, pattern, ok", [
    (">", "a", True), (">", "a.>", True), ("a.>", "a", False), ("a.>", "a.*.>", True), ("a.*", "a.>", False),
    ("a.*", "a.*", True), ("a.*.c", "a.b.c", True), ("a.b", "a.*", False), ("*.*", "a.>", False),
])
def test_covers_is_a_subset_check(rule, pattern, ok):
    assert covers(rule, pattern) is ok


@pytest.mark.parametrize("a, b, ok", [
    ("x.>", "x.secret", True), (">", "a.b", True), ("x.*", "x.a.b", False), ("y.*.hidden", "y.a.*", True),
    ("a.b", "a.c", False), ("a", "a.>", False), ("*", "a", True),
])
def test_intersects(a, b, ok):
    assert intersects(a, b) is ok and intersects(b, a) is ok


def test_delivery_filter_only_for_subscriptions_reaching_into_deny():
    perms = permissions_from({"subscribe": {"deny": ["x.secret", "jobs.* slow"]}}, "p")
    check = perms.delivery_filter("x.>")
    assert not check("x.secret") and check("x.ok")
    assert perms.delivery_filter("y.>") is None and perms.delivery_filter("jobs.a") is None


def test_deny_reads_wildcards_literally_like_the_sublist():
    perms = permissions_from({"subscribe": {"deny": ["$SYS.>"]}}, "p")
    assert perms.can_subscribe(">", "") and not perms.can_subscribe("$SYS.>", "")


def test_deny_with_queue_entry_denies_only_that_queue():
    perms = permissions_from({"subscribe": {"deny": ["jobs.* slow"]}}, "p")
    assert perms.can_subscribe("jobs.a", "fast") and not perms.can_subscribe("jobs.a", "slow")
    assert perms.can_subscribe("jobs.a", "")


def test_token_and_single_user_and_default_permissions():
    assert auth_from_block({"token": "t"}).authenticate(_conn(auth_token="t")) is True
    assert auth_from_block({"token": "t"}).authenticate(_conn(auth_token="u")) is False
    one = auth_from_block({"user": "a", "password": "b", "default_permissions": {"publish": "x"}})
    perms = one.authenticate(_conn(user="a", password="b"))
    assert perms.can_publish("x") and not perms.can_publish("y")
    assert not simple_auth().required


def test_no_auth_user_lets_clients_without_credentials_in_as_that_user():
    block = {"users": [{"user": "a", "password": "p", "permissions": {"publish": "pub.>"}},
                       {"user": "b", "password": "q"}]}
    auth = auth_from_block(block, no_auth_user="a")
    assert auth.enabled and not auth.required
    assert auth.initial_permissions.can_publish("pub.x") and not auth.initial_permissions.can_publish("x")
    assert auth.authenticate(_conn()).can_publish("pub.x")
    assert auth.authenticate(_conn(user="b", password="q")) is True
    assert auth.authenticate(_conn(user="b", password="bad")) is False
    assert auth.authenticate(_conn(auth_token="zzz")) is False
    with pytest.raises(AuthConfigError, match="not a user"):
        auth_from_block(block, no_auth_user="zed")


@pytest.mark.parametrize("block, words", [
    ({"users": [{"user": "a"}]}, "users[0]: needs user and password"),
    ({"users": [{"user": "a", "password": "b"}], "token": "t"}, "cannot be combined"),
    ({"users": [{"user": "a", "password": "b"}, {"user": "a", "password": "c"}]}, "listed twice"),
    ({"users": [{"nkey": "UAB"}]}, "nkey users are not supported"),
    ({"users": [{"user": "a", "password": "b", "permissions": {"publish": "a..b"}}]}, "not a valid subject"),
    ({"users": [{"user": "a", "password": "b", "permissions": {"allow_responses": True}}]},
     "allow_responses is not supported"),
    ({"users": [{"user": "a", "password": "b", "permissions": {"publsh": "x"}}]}, "unknown permission key"),
    ({"no_auth_user": "a"}, "belongs at the top level"),
    ({"timeout": 0}, "positive number"),
    ({"user": "a"}, "go together"),
])
def test_bad_authorization_blocks(block, words):
    with pytest.raises(AuthConfigError) as info:
        auth_from_block(block)
    assert words in str(info.value)
