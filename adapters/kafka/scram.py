"""The server side of one SASL/SCRAM exchange (RFC 5802, RFC 7677), sans-I/O.

Theory of operation
-------------------
SCRAM is two round trips (RFC 5802 section 5)::

    client-first   n,,n=<user>,r=<client nonce>
    server-first   r=<client nonce><server nonce>,s=<salt, base64>,i=<iterations>
    client-final   c=<base64 of the gs2 header>,r=<both nonces>,p=<ClientProof, base64>
    server-final   v=<ServerSignature, base64>

:class:`ScramExchange` takes the two client messages as bytes and gives the
two server messages as bytes; it looks the user's credential up through the
``lookup(username, mechanism)`` it is given (``UserStore.scram_credential``,
which answers a mock credential for an unknown user, so the exchange runs the
same either way) and draws its nonce from the injected ``random(n)``. No
socket, no clock. The AuthMessage is built from the messages as the client
sent them (RFC 5802 section 3), and the proof is checked with
``core.scram.verify_proof``. Whether the login then stands (the user exists,
is active, the address is not throttled) is the user store's decision
(``UserStore.scram_login``), which the caller asks with :attr:`username` and
the verdict.

What is refused (:class:`ScramFailure`), each a SASL_AUTHENTICATION_FAILED for
the Kafka client: a gs2 header other than ``n`` (``p=``: channel binding,
which this server does not offer; ``y``: Kafka's ScramMessages accepts only
``n`` too), an authzid other than the user name (Kafka's ScramSaslServer
refuses it likewise), a name with ``=`` outside the ``=2C``/``=3D`` escapes
(RFC 5802 section 5.1 says the server MUST fail then), the reserved ``m=``
attribute (a MUST-fail too), any extension (Kafka's only one, ``tokenauth``,
asks for delegation-token authentication, which Ferry does not have), a
channel binding other than the gs2 header echoed, a nonce other than the one
the server sent, a proof that is not the hash's size or does not verify, and
any message longer than its named limit.
"""

from __future__ import annotations

import base64
import binascii
from typing import Callable

from core.auth_limits import MAX_USERNAME_BYTES
from core.errors import FerryError
from core.scram import ScramCredential, server_signature, verify_proof

MAX_NONCE = 256  # a client nonce; clients send a few dozen characters, this leaves room
# A client-first message holds the gs2 header, an authzid and a user name (each at
# most MAX_USERNAME_BYTES of UTF-8, Ferry's user name limit, three times that when
# every character is escaped as =2C) and a nonce: anything longer is no message of
# a user Ferry can have.
MAX_CLIENT_FIRST = 16 + 2 * 3 * MAX_USERNAME_BYTES + MAX_NONCE
# A client-final message holds c= (the base64 of that gs2 header: ~210 characters),
# r= (both nonces: at most MAX_NONCE + 32) and p= (a SHA-512 proof: 88 characters):
# 1 KiB holds the longest one Ferry can get.
MAX_CLIENT_FINAL = 1024
SERVER_NONCE_BYTES = 24  # 192 random bits, 32 base64 characters (Kafka's nonce has 130 bits)
TOKEN_AUTH = "tokenauth"  # Kafka's ScramLoginModule.TOKEN_AUTH_CONFIG extension


class ScramFailure(Exception):
    """The exchange failed; the text is for the log, never for the client."""


def _printable(value: str) -> bool:
    # RFC 5802 section 7: a nonce is printable ASCII (0x21-0x7E) without ','.
    return all(0x21 <= ord(ch) <= 0x7E and ch != "," for ch in value)


def _sasl_name(value: str) -> str:
    """An escaped saslname (RFC 5802 section 5.1): '=2C' is ',', '=3D' is '=', and any
    other '=' fails the authentication."""
    if "\0" in value:
        raise ScramFailure("NUL in a SCRAM name")
    parts = value.split("=")
    out = [parts[0]]
    for part in parts[1:]:
        if part.startswith("2C"):
            out.append("," + part[2:])
        elif part.startswith("3D"):
            out.append("=" + part[2:])
        else:
            raise ScramFailure("a SCRAM name with '=' outside the =2C and =3D escapes")
    return "".join(out)


def _b64(value: str, what: str) -> bytes:
    try:
        return base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise ScramFailure(f"the SCRAM {what} is not base64") from None


def _attributes(text: str, names: str, what: str) -> list[str]:
    """The values of ``text``'s comma-separated attributes, which must be exactly ``names``
    in that order (one letter each): extensions and the reserved ``m=`` are refused."""
    parts = text.split(",")
    if parts and parts[0].startswith("m="):
        raise ScramFailure(f"the SCRAM {what} has a mandatory extension (m=)")
    if len(parts) > len(names):
        if any(p.startswith(TOKEN_AUTH + "=") for p in parts):
            raise ScramFailure("delegation-token authentication (tokenauth) is not offered")
        raise ScramFailure(f"the SCRAM {what} has extensions, which are not offered")
    if len(parts) != len(names) or any(p[:2] != f"{n}=" for p, n in zip(parts, names)):
        raise ScramFailure(f"malformed SCRAM {what}")
    return [p[2:] for p in parts]


class ScramExchange:
    """One SCRAM exchange for ``mechanism`` (module docstring): :meth:`first`, then
    :meth:`final`; any failure raises :class:`ScramFailure` and ends it."""

    def __init__(self, mechanism: str, lookup: Callable[[str, str], ScramCredential],
                 random: Callable[[int], bytes]) -> None:
        self.mechanism = mechanism
        self._lookup = lookup
        self._random = random
        self.username: str | None = None  # known once the client-first parsed
        self.credential: ScramCredential | None = None  # the one the server-first offered
        self._final_seen = False
        self._gs2 = ""
        self._nonce = ""
        self._auth_prefix = ""  # client-first-bare "," server-first

    def first(self, message: bytes) -> bytes:
        """The server-first message answering ``message`` (the client-first)."""
        if self._gs2:
            raise ScramFailure("a second SCRAM client-first message")
        text = self._text(message, MAX_CLIENT_FIRST, "client-first message")
        flag, sep, rest = text.partition(",")
        authz, sep2, bare = rest.partition(",")
        if not sep or not sep2:
            raise ScramFailure("malformed SCRAM client-first message")
        if flag != "n":
            raise ScramFailure("SCRAM channel binding is not offered" if flag.startswith("p=")
                               else "malformed SCRAM gs2 header")
        if authz and not authz.startswith("a="):
            raise ScramFailure("malformed SCRAM authzid")
        name, nonce = _attributes(bare, "nr", "client-first message")
        username = _sasl_name(name)
        if not username or not nonce or len(nonce) > MAX_NONCE or not _printable(nonce):
            raise ScramFailure("malformed SCRAM client-first message")
        if authz and _sasl_name(authz[2:]) != username:
            raise ScramFailure("a SCRAM authzid other than the user name")
        try:
            credential = self._lookup(username, self.mechanism)
        except FerryError as exc:  # the metadata store refused the read: no login now
            raise ScramFailure(f"SCRAM credentials could not be read: {exc}") from None
        server_nonce = base64.b64encode(self._random(SERVER_NONCE_BYTES)).decode("ascii")
        server_first = (f"r={nonce}{server_nonce},s={base64.b64encode(credential.salt).decode('ascii')},"
                        f"i={credential.iterations}")
        self.username, self.credential = username, credential
        self._gs2 = f"{flag},{authz},"
        self._nonce = nonce + server_nonce
        self._auth_prefix = f"{bare},{server_first}"
        return server_first.encode("ascii")

    def final(self, message: bytes) -> bytes:
        """The server-final message when ``message`` (the client-final) proves the password;
        ScramFailure otherwise."""
        credential = self.credential
        if credential is None or self._final_seen:
            raise ScramFailure("a SCRAM client-final message out of order")
        self._final_seen = True  # one try per exchange
        text = self._text(message, MAX_CLIENT_FINAL, "client-final message")
        without_proof, sep, proof_attr = text.rpartition(",")
        if not sep or not proof_attr.startswith("p="):
            raise ScramFailure("malformed SCRAM client-final message")
        binding, nonce = _attributes(without_proof, "cr", "client-final message")
        if _b64(binding, "channel binding") != self._gs2.encode("utf-8"):
            raise ScramFailure("the SCRAM channel binding is not the gs2 header sent")
        if nonce != self._nonce:
            raise ScramFailure("the SCRAM nonce is not the one the server sent")
        proof = _b64(proof_attr[2:], "proof")
        auth_message = f"{self._auth_prefix},{without_proof}".encode("utf-8")
        if not verify_proof(credential, auth_message, proof):
            raise ScramFailure("the SCRAM proof does not verify")
        return b"v=" + base64.b64encode(server_signature(credential, auth_message))

    @staticmethod
    def _text(message: bytes, limit: int, what: str) -> str:
        if len(message) > limit:
            raise ScramFailure(f"SCRAM {what} longer than {limit} bytes")
        try:
            return bytes(message).decode("utf-8")
        except UnicodeDecodeError:
            raise ScramFailure(f"SCRAM {what} is not UTF-8") from None
