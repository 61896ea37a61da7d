"""The binary permissions blob (iggy.md 3.7) round-trips core Permissions, per id edge."""

from __future__ import annotations

import pytest

from adapters.iggy.errors import IggyStatus
from adapters.iggy.permissions import decode_permissions, encode_permissions
from core.permissions import GlobalPermissions, Permissions, StreamPermissions, TopicPermissions

CASES = [
    Permissions.root(),
    Permissions(GlobalPermissions(read_streams=True)),
    Permissions(GlobalPermissions(), {0: StreamPermissions(read_topics=True)}),
    Permissions(GlobalPermissions(poll_messages=True), {
        0: StreamPermissions(manage_stream=True, topics={0: TopicPermissions(read_topic=True),
                                                         3: TopicPermissions(send_messages=True)}),
        5: StreamPermissions(send_messages=True),
    }),
]


@pytest.mark.parametrize("perms", CASES)
@pytest.mark.parametrize("edge", [0, 1])
def test_round_trip(perms, edge):
    assert decode_permissions(encode_permissions(perms, edge), edge) == perms


def test_seed_era_ids_are_one_based():
    blob = encode_permissions(CASES[2], 1)
    assert blob[11:15] == (1).to_bytes(4, "little")


@pytest.mark.parametrize("cut", range(1, 30))
def test_truncated_blob_is_status_3(cut):
    blob = encode_permissions(CASES[3])
    if cut < len(blob):
        with pytest.raises(IggyStatus):
            decode_permissions(blob[:cut])


def test_trailing_bytes_refused():
    with pytest.raises(IggyStatus):
        decode_permissions(encode_permissions(CASES[0]) + b"\x00")
