"""SASL/SCRAM on the Kafka listener, sans-I/O: adapters/kafka/scram.py fed by a SCRAM client
written here from RFC 5802 (not from a library), malformed and hostile messages, then the
whole exchange through KafkaSession (SaslHandshake v1 + SaslAuthenticate, and v0 with bare
tokens) on a real broker in a temporary directory."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from adapters.kafka import frames
from adapters.kafka.context import Access, KafkaContext, KafkaOptions
from adapters.kafka.errors import ErrorCode as E
from adapters.kafka.messages import METADATA
from adapters.kafka.messages_admin import SASL_AUTHENTICATE, SASL_HANDSHAKE
from adapters.kafka.sasl import MECHANISMS
from adapters.kafka.scram import MAX_CLIENT_FINAL, MAX_CLIENT_FIRST, ScramExchange, ScramFailure
from adapters.kafka.session import KafkaSession
from core.broker import Broker
from core.permissions import Permissions
from core.scram import derive

PASSWORD = "scram-password"
HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
class RfcClient:
    """The client side of RFC 5802 section 3 and 5, step by step."""

    def __init__(self, mechanism, user, password, nonce="fyko+d2lbbFgONRv9qkxdawL", authzid=""):
        self.h = HASHES[mechanism]
        self.password = password.encode()
        self.nonce = nonce
        escaped = user.replace("=", "=3D").replace(",", "=2C")
        self.gs2 = "n," + (f"a={authzid.replace('=', '=3D').replace(',', '=2C')}" if authzid else "") + ","
        self.first_bare = f"n={escaped},r={nonce}"
        self.server_signature = None

    def first(self) -> bytes:
        return (self.gs2 + self.first_bare).encode()

    def final(self, server_first: bytes, *, binding=None, nonce=None, password=None) -> bytes:
        text = server_first.decode()
        attrs = dict(part.split("=", 1) for part in text.split(","))
        assert attrs["r"].startswith(self.nonce)
        salted = hashlib.pbkdf2_hmac(self.h, password or self.password, base64.b64decode(attrs["s"]), int(attrs["i"]))
        client_key = hmac.digest(salted, b"Client Key", self.h)
        stored_key = hashlib.new(self.h, client_key).digest()
        binding = binding if binding is not None else base64.b64encode(self.gs2.encode()).decode()
        without_proof = f"c={binding},r={nonce or attrs['r']}"
        auth_message = f"{self.first_bare},{text},{without_proof}".encode()
        signature = hmac.digest(stored_key, auth_message, self.h)
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        server_key = hmac.digest(salted, b"Server Key", self.h)
        self.server_signature = hmac.digest(server_key, auth_message, self.h)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> bool:
        return server_final == b"v=" + base64.b64encode(self.server_signature)


def fixed_random(n: int) -> bytes:
    return bytes(range(n))


def exchange_for(mechanism="SCRAM-SHA-256", users=None):
    """An exchange whose lookup knows ``users`` (name -> password) and records the names asked."""
    users = {"alice": PASSWORD} if users is None else users
    creds = {name: derive(mechanism, pw) for name, pw in users.items()}
    asked = []

    def lookup(name, mech):
        asked.append(name)
        assert mech == mechanism
        return creds.get(name) or derive(mechanism, "never-anyones-password")

    return ScramExchange(mechanism, lookup, fixed_random), asked


@pytest.mark.parametrize("mechanism", sorted(HASHES))
def test_the_rfc_client_logs_in_and_checks_the_server(mechanism):
    ex, _ = exchange_for(mechanism)
    client = RfcClient(mechanism, "alice", PASSWORD)
    server_first = ex.first(client.first())
    assert server_first.startswith(f"r={client.nonce}".encode()) and b",i=4096" in server_first
    assert client.verify(ex.final(client.final(server_first)))
    assert ex.username == "alice"


def test_rfc7677_exchange_with_its_credential():
    # RFC 7677 section 3: user "user", password "pencil", its salt and client nonce.
    cred = derive("SCRAM-SHA-256", "pencil", salt=base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ=="))
    ex = ScramExchange("SCRAM-SHA-256", lambda name, mech: cred, fixed_random)
    client = RfcClient("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    assert client.first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    server_first = ex.first(client.first())
    assert server_first.endswith(b",s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    assert client.verify(ex.final(client.final(server_first)))


def test_a_wrong_password_fails_and_the_exchange_takes_one_try():
    ex, _ = exchange_for()
    client = RfcClient("SCRAM-SHA-256", "alice", PASSWORD)
    server_first = ex.first(client.first())
    with pytest.raises(ScramFailure, match="proof"):
        ex.final(client.final(server_first, password=b"wrong-password"))
    with pytest.raises(ScramFailure, match="out of order"):  # no second try on the same nonce
        ex.final(client.final(server_first))


def test_a_wrong_nonce_fails():
    ex, _ = exchange_for()
    client = RfcClient("SCRAM-SHA-256", "alice", PASSWORD)
    server_first = ex.first(client.first())
    with pytest.raises(ScramFailure, match="nonce"):
        ex.final(client.final(server_first, nonce=client.nonce + "AAAAAAAA"))


@pytest.mark.parametrize("binding", ["eSws",  # base64("y,,")
                                     "cD10bHMtdW5pcXVlLCw=",  # base64("p=tls-unique,,")
                                     "biwsYWJj",  # "n,," followed by channel data
                                     "biws!"])  # not base64
def test_a_tampered_channel_binding_fails(binding):
    ex, _ = exchange_for()
    client = RfcClient("SCRAM-SHA-256", "alice", PASSWORD)
    server_first = ex.first(client.first())
    with pytest.raises(ScramFailure, match="channel binding"):
        ex.final(client.final(server_first, binding=binding))


def test_an_authzid_must_be_the_user_and_is_bound_in_the_final_message():
    ex, _ = exchange_for()
    client = RfcClient("SCRAM-SHA-256", "alice", PASSWORD, authzid="alice")
    assert client.verify(ex.final(client.final(ex.first(client.first()))))
    ex, asked = exchange_for()
    with pytest.raises(ScramFailure, match="authzid"):
        ex.first(RfcClient("SCRAM-SHA-256", "alice", PASSWORD, authzid="root").first())
    assert asked == []  # refused before any lookup
    ex, _ = exchange_for()
    client = RfcClient("SCRAM-SHA-256", "alice", PASSWORD, authzid="alice")
    with pytest.raises(ScramFailure, match="channel binding"):  # the header without the authzid
        ex.final(client.final(ex.first(client.first()), binding="biws"))


def test_escaped_names_are_unescaped():
    name = "a,b=c"
    ex, asked = exchange_for(users={name: PASSWORD})
    client = RfcClient("SCRAM-SHA-256", name, PASSWORD)
    assert b"n=a=2Cb=3Dc," in client.first()
    assert client.verify(ex.final(client.final(ex.first(client.first()))))
    assert asked == [name] and ex.username == name


BAD_CLIENT_FIRST = [
    (b"", "malformed"),
    (b"n,,", "malformed"),
    (b"n,,n=alice", "malformed"),
    (b"n,,r=abc,n=alice", "malformed"),  # attributes out of order
    (b"p=tls-unique,,n=alice,r=abc", "channel binding"),
    (b"y,,n=alice,r=abc", "gs2 header"),
    (b"n,x=alice,n=alice,r=abc", "authzid"),
    (b"n,,m=ext,n=alice,r=abc", "mandatory extension"),
    (b"n,,n=alice,r=abc,tokenauth=true", "tokenauth"),
    (b"n,,n=alice,r=abc,x=1", "extensions"),
    (b"n,,n=al=2Xice,r=abc", "escapes"),
    (b"n,,n=alice=,r=abc", "escapes"),
    (b"n,,n=al\0ice,r=abc", "NUL"),
    (b"n,,n=,r=abc", "malformed"),
    (b"n,,n=alice,r=", "malformed"),
    (b"n,,n=alice,r=ab\x7fc", "malformed"),  # a nonce is printable ASCII
    (b"n,,n=alice,r=" + b"x" * 257, "malformed"),  # MAX_NONCE
    (b"n,,n=\xff\xfe,r=abc", "UTF-8"),
    (b"n,,n=" + b"a" * MAX_CLIENT_FIRST + b",r=abc", "longer than"),
]


@pytest.mark.parametrize("message, why", BAD_CLIENT_FIRST)
def test_bad_client_first_messages_fail_before_any_lookup(message, why):
    ex, asked = exchange_for()
    with pytest.raises(ScramFailure, match=why):
        ex.first(message)
    assert asked == [] and ex.username is None


def test_bad_client_final_messages_fail():
    cases = [
        (lambda good: b"", "malformed"),
        (lambda good: good.replace(b",p=", b",q="), "malformed"),
        (lambda good: good.replace(b",p=", b",x=1,p="), "extensions"),
        (lambda good: good.split(b",p=")[0] + b",p=not-base64!", "proof"),
        (lambda good: good + b"A" * MAX_CLIENT_FINAL, "longer than"),
        (lambda good: good.replace(b"c=", b"C=", 1), "malformed"),
    ]
    for tamper, why in cases:
        ex, _ = exchange_for()
        client = RfcClient("SCRAM-SHA-256", "alice", PASSWORD)
        good = client.final(ex.first(client.first()))
        with pytest.raises(ScramFailure, match=why):
            ex.final(tamper(good))
    ex, _ = exchange_for()
    with pytest.raises(ScramFailure, match="out of order"):
        ex.final(b"c=biws,r=abc,p=AAAA")


# -- through the session ------------------------------------------------------------------
@pytest.fixture
def ctx(tmp_path):
    with Broker.open(tmp_path / "data") as broker:
        broker.meta.users.create_user("alice", PASSWORD, permissions=Permissions.root())
        yield KafkaContext(broker, host="127.0.0.1", port=9092, options=KafkaOptions())


class Conn:
    """One connection's session, driven as adapters/kafka/driver.py drives it."""

    def __init__(self, ctx):
        self.users = ctx.broker.meta.users
        self.session = KafkaSession(ctx, Access(self.users))
        self.corr = 0

    def send(self, api, version, **fields):
        self.corr += 1
        frame = frames.encode_request(api.key, version, self.corr, "test", api.request.make(**fields))
        return self.run(self.session.handle(frame[4:], 0))

    def run(self, outcome):
        while outcome.kind in ("login", "scram_login"):
            try:
                result = (self.users.authenticate(*outcome.wait) if outcome.kind == "login"
                          else self.users.scram_login(*outcome.wait[:2], credential=outcome.wait[2]))
            except Exception as exc:  # noqa: BLE001 - handed to the session as the driver does
                result = exc
            outcome = self.session.login_done(result)
        return outcome

    def answer(self, api, version, outcome):
        corr, value = frames.decode_response(api.key, version, outcome.frame[4:])
        assert corr == self.corr
        return value


@pytest.mark.parametrize("mechanism", sorted(HASHES))
def test_session_scram_v1_logs_in(ctx, mechanism):
    c = Conn(ctx)
    hs = c.answer(SASL_HANDSHAKE, 1, c.send(SASL_HANDSHAKE, 1, mechanism=mechanism))
    assert hs.error_code == 0 and set(hs.mechanisms) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"} == set(MECHANISMS)
    client = RfcClient(mechanism, "alice", PASSWORD)
    first = c.send(SASL_AUTHENTICATE, 2, auth_bytes=client.first())
    assert first.kind == "reply" and not c.session.authenticated
    server_first = c.answer(SASL_AUTHENTICATE, 2, first)
    assert server_first.error_code == 0
    final = c.send(SASL_AUTHENTICATE, 2, auth_bytes=client.final(server_first.auth_bytes))
    done = c.answer(SASL_AUTHENTICATE, 2, final)
    assert final.kind == "reply" and done.error_code == 0 and client.verify(done.auth_bytes)
    assert c.session.authenticated and c.session.access.username == "alice"
    assert c.send(METADATA, 1, topics=None).kind == "reply"


def test_session_scram_v0_uses_bare_tokens(ctx):
    c = Conn(ctx)
    c.send(SASL_HANDSHAKE, 0, mechanism="SCRAM-SHA-512")
    client = RfcClient("SCRAM-SHA-512", "alice", PASSWORD)
    first = c.run(c.session.handle(client.first(), 0))
    size = frames.SIZE.unpack(first.frame[:4])[0]
    assert first.kind == "reply" and size == len(first.frame) - 4 and first.frame[4:].startswith(b"r=")
    final = c.run(c.session.handle(client.final(first.frame[4:]), 0))
    assert final.kind == "reply" and client.verify(final.frame[4:])
    assert c.session.authenticated


def test_session_wrong_password_and_unknown_user_fail_alike(ctx):
    answers = []
    for user, password in (("alice", "wrong-password"), ("nobody", PASSWORD)):
        c = Conn(ctx)
        c.send(SASL_HANDSHAKE, 1, mechanism="SCRAM-SHA-256")
        client = RfcClient("SCRAM-SHA-256", user, password)
        server_first = c.answer(SASL_AUTHENTICATE, 1, c.send(SASL_AUTHENTICATE, 1, auth_bytes=client.first()))
        attrs = dict(p.split("=", 1) for p in server_first.auth_bytes.decode().split(","))
        final = c.send(SASL_AUTHENTICATE, 1, auth_bytes=client.final(server_first.auth_bytes))
        value = c.answer(SASL_AUTHENTICATE, 1, final)
        assert final.kind == "close" and value.error_code == E.SASL_AUTHENTICATION_FAILED
        assert not c.session.authenticated
        answers.append((len(base64.b64decode(attrs["s"])), attrs["i"], value.error_message))
    assert answers[0] == answers[1]


def test_session_malformed_client_first_closes_and_v0_closes_without_a_frame(ctx):
    c = Conn(ctx)
    c.send(SASL_HANDSHAKE, 1, mechanism="SCRAM-SHA-256")
    out = c.send(SASL_AUTHENTICATE, 1, auth_bytes=b"p=tls-unique,,n=alice,r=abc")
    assert out.kind == "close" and c.answer(SASL_AUTHENTICATE, 1, out).error_code == E.SASL_AUTHENTICATION_FAILED
    c = Conn(ctx)
    c.send(SASL_HANDSHAKE, 0, mechanism="SCRAM-SHA-256")
    out = c.run(c.session.handle(b"n,,n=alice", 0))
    assert out.kind == "close" and out.frame is None


def test_session_refuses_other_mechanisms_and_a_second_handshake(ctx):
    c = Conn(ctx)
    out = c.send(SASL_HANDSHAKE, 1, mechanism="GSSAPI")
    assert out.kind == "close" and c.answer(SASL_HANDSHAKE, 1, out).error_code == E.UNSUPPORTED_SASL_MECHANISM
    c = Conn(ctx)
    c.send(SASL_HANDSHAKE, 1, mechanism="SCRAM-SHA-256")
    c.send(SASL_AUTHENTICATE, 1, auth_bytes=RfcClient("SCRAM-SHA-256", "alice", PASSWORD).first())
    out = c.send(SASL_HANDSHAKE, 1, mechanism="PLAIN")
    assert out.kind == "close" and c.answer(SASL_HANDSHAKE, 1, out).error_code == E.ILLEGAL_SASL_STATE
