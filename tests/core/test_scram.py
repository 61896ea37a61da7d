"""SCRAM credentials beside the argon2 hashes (core/scram.py, core/auth.py): RFC 7677's
test vector, credentials written with every password and at the first login of a user
from before them, deleted with the user, mock credentials for unknown users, and
UserStore.scram_login through the login guard and the audit log."""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import sqlite3

import pytest

from core import metadb
from core.access import FREE_FAILURES, bind_actor
from core.errors import InvalidArgument, InvalidCredentials, LoginThrottled, UserInactive
from core.scram import MECHANISMS, SALT_BYTES, SCRAM_ITERATIONS, derive, server_signature, verify_proof
from metadata_helpers import FAST_HASHER, FakeClock, open_meta, raw_rows

HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}

# RFC 7677 section 3: user "user", password "pencil".
RFC_CLIENT_FIRST_BARE = "n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_FIRST = ("r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    "s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
RFC_CLIENT_FINAL_WITHOUT_PROOF = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_PROOF = "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
RFC_SERVER_SIGNATURE = "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


@pytest.fixture
def meta(tmp_path):
    m = open_meta(tmp_path / "metadata.sqlite", FakeClock())
    m.users.ensure_root("iggy", "iggy-root")
    yield m
    m.close()


def client_proof(mechanism: str, password: str, cred, auth_message: bytes) -> bytes:
    """ClientProof as a client computes it from the password (RFC 5802 section 3)."""
    h = HASHES[mechanism]
    salted = hashlib.pbkdf2_hmac(h, password.encode(), cred.salt, cred.iterations)
    client_key = hmac.digest(salted, b"Client Key", h)
    signature = hmac.digest(hashlib.new(h, client_key).digest(), auth_message, h)
    return bytes(a ^ b for a, b in zip(client_key, signature))


def test_rfc7677_sha256_test_vector():
    cred = derive("SCRAM-SHA-256", "pencil", salt=base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ=="), iterations=4096)
    auth_message = ",".join((RFC_CLIENT_FIRST_BARE, RFC_SERVER_FIRST, RFC_CLIENT_FINAL_WITHOUT_PROOF)).encode()
    assert verify_proof(cred, auth_message, base64.b64decode(RFC_PROOF))
    assert base64.b64encode(server_signature(cred, auth_message)).decode() == RFC_SERVER_SIGNATURE
    wrong = bytearray(base64.b64decode(RFC_PROOF))
    wrong[0] ^= 1
    assert not verify_proof(cred, auth_message, bytes(wrong))
    assert not verify_proof(cred, auth_message, base64.b64decode(RFC_PROOF)[:-1])  # a proof of the wrong size
    with pytest.raises(InvalidArgument):
        derive("SCRAM-MD5", "pencil")


def test_create_user_stores_both_mechanisms_for_the_password(meta, tmp_path):
    alice = meta.users.create_user("alice", "alice-pw")
    rows = raw_rows(tmp_path / "metadata.sqlite",
                    "SELECT mechanism, length(salt), iterations FROM scram_credentials WHERE user_id = ?", (alice.id,))
    assert sorted(rows) == [(m, SALT_BYTES, SCRAM_ITERATIONS) for m in sorted(MECHANISMS)]
    for mechanism in MECHANISMS:
        cred = meta.users.scram_credential("alice", mechanism)
        assert cred.user_id == alice.id and not cred.mock
        again = derive(mechanism, "alice-pw", salt=cred.salt, iterations=cred.iterations)
        assert (again.stored_key, again.server_key) == (cred.stored_key, cred.server_key)
    root = meta.users.scram_credential("iggy", "SCRAM-SHA-512")  # ensure_root goes through create_user
    assert root.user_id == 0 and root.stored_key == derive("SCRAM-SHA-512", "iggy-root", salt=root.salt).stored_key


def test_change_password_replaces_the_credentials(meta):
    meta.users.create_user("alice", "old-password")
    before = meta.users.scram_credential("alice", "SCRAM-SHA-256")
    meta.users.change_password("alice", "old-password", "new-password")
    after = meta.users.scram_credential("alice", "SCRAM-SHA-256")
    assert after.salt != before.salt
    assert after.stored_key == derive("SCRAM-SHA-256", "new-password", salt=after.salt).stored_key
    with pytest.raises(InvalidCredentials):  # the exchange that began before the change
        meta.users.scram_login("alice", True, credential=before)
    assert meta.users.scram_login("alice", True, credential=after).username == "alice"


def test_a_user_from_before_scram_gets_credentials_at_its_first_password_login(tmp_path):
    path = tmp_path / "metadata.sqlite"
    # An existing data dir: schema 3 with its root user, no SCRAM table yet.
    db = metadb.MetaDb(path)
    db.migrate(metadb.MIGRATIONS[:3])
    db.close()
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO users (id, username, password_hash, status, created_at) VALUES (0, 'iggy', ?,"
                 " 'active', 1)", (FAST_HASHER.hash("iggy-root"),))
    conn.commit()
    conn.close()
    with open_meta(path) as m:
        assert m.schema_version() == 4
        assert m.users.scram_credential("iggy", "SCRAM-SHA-256").mock
        with pytest.raises(InvalidCredentials):
            m.users.authenticate("iggy", "wrong-password")
        assert raw_rows(path, "SELECT COUNT(*) FROM scram_credentials") == [(0,)]  # not on a failure
        m.users.authenticate("iggy", "iggy-root")
        for mechanism in MECHANISMS:
            cred = m.users.scram_credential("iggy", mechanism)
            assert not cred.mock and cred.stored_key == derive(mechanism, "iggy-root", salt=cred.salt).stored_key
        kept = raw_rows(path, "SELECT salt FROM scram_credentials ORDER BY mechanism")
        m.users.authenticate("iggy", "iggy-root")
        assert raw_rows(path, "SELECT salt FROM scram_credentials ORDER BY mechanism") == kept  # written once


def test_credentials_go_with_their_user(meta, tmp_path):
    alice = meta.users.create_user("alice", "alice-pw")
    meta.users.delete_user("alice")
    assert raw_rows(tmp_path / "metadata.sqlite", "SELECT COUNT(*) FROM scram_credentials WHERE user_id = ?",
                    (alice.id,)) == [(0,)]
    assert meta.users.scram_credential("alice", "SCRAM-SHA-256").mock


def test_unknown_users_get_a_stable_mock_credential(meta, tmp_path):
    real = meta.users.scram_credential("iggy", "SCRAM-SHA-512")
    mock = meta.users.scram_credential("nobody", "SCRAM-SHA-512")
    assert mock.mock and mock == meta.users.scram_credential("nobody", "SCRAM-SHA-512")
    assert (len(mock.salt), mock.iterations, len(mock.stored_key), len(mock.server_key)) == (
        len(real.salt), real.iterations, len(real.stored_key), len(real.server_key))
    assert meta.users.scram_credential("somebody", "SCRAM-SHA-512").salt != mock.salt
    assert meta.users.scram_credential("nobody", "SCRAM-SHA-256").salt != mock.salt
    meta.close()
    with open_meta(tmp_path / "metadata.sqlite") as again:  # the secret is stored: same after a restart
        assert again.users.scram_credential("nobody", "SCRAM-SHA-512") == mock
    with pytest.raises(InvalidArgument):
        again.users.scram_credential("nobody", "SCRAM-SHA-1")


def test_scram_login_goes_through_the_guard_and_the_audit_log(meta, caplog):
    caplog.set_level(logging.INFO, logger="ferry.audit")
    alice = meta.users.create_user("alice", "alice-pw")
    cred = meta.users.scram_credential("alice", "SCRAM-SHA-256")
    proof_ok = verify_proof(cred, b"msg", client_proof("SCRAM-SHA-256", "alice-pw", cred, b"msg"))
    assert proof_ok
    bind_actor("kafka", "10.1.2.3:5555")
    try:
        assert meta.users.scram_login("alice", proof_ok, credential=cred) == alice
        with pytest.raises(InvalidCredentials):
            meta.users.scram_login("nobody", True, credential=meta.users.scram_credential("nobody", "SCRAM-SHA-256"))
        meta.users.update_user("alice", status="inactive")
        with pytest.raises(UserInactive):
            meta.users.scram_login("alice", True, credential=cred)
        for _ in range(FREE_FAILURES - 1):
            with pytest.raises(InvalidCredentials):
                meta.users.scram_login("alice", False, credential=cred)
        with pytest.raises(LoginThrottled):  # the same address's failures, whatever the mechanism
            meta.users.authenticate("iggy", "iggy-root")
    finally:
        bind_actor("local")
    failed = [r for r in caplog.records if r.name == "ferry.audit" and r.outcome == "failed"]
    assert [r.target for r in failed] == ["nobody", "alice"] + ["alice"] * (FREE_FAILURES - 1)
    assert {(r.protocol, r.addr) for r in failed} == {("kafka", "10.1.2.3")}
