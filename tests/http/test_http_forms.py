"""adapters/http/forms.py: HTTP JSON forms derived from the Iggy reply records."""

from __future__ import annotations

import pytest

from adapters.http import forms
from adapters.iggy import replies as R
from adapters.wire.table import SpecError


def test_form_refuses_a_key_that_is_neither_field_nor_extra():
    with pytest.raises(SpecError):
        forms.JsonForm(R.GROUP, ("id", "nonsense"))
    with pytest.raises(SpecError):
        forms.JsonForm(R.GROUP, ("id",), convert={"name": str})


def test_forms_apply_only_the_declared_differences():
    member = forms.MEMBER.json(R.MEMBER.make(id=7, partitions=(0, 2)))
    assert member == {"id": 7, "partitions_count": 2, "partitions": [0, 2]}  # numbered from 0, as the core
    assert forms.PAT.json(R.PAT_INFO.make(name="pat", expiry_at=0)) == {"name": "pat", "expiry_at": None}
    group = R.GROUP.make(id=0, partitions_count=1, members_count=0, name="g")
    assert list(forms.GROUP.json(group)) == ["id", "name", "partitions_count", "members_count"]
    assert forms.GROUP.json(group, members=[])["members"] == []
    assert forms.PARTITION.schema()["segments_count"] == {"type": "integer", "minimum": 0, "maximum": 2**32 - 1}


def test_client_json_from_an_iggy_session(tmp_path):
    from adapters.http import models
    from adapters.iggy.session import TRANSPORT_QUIC, IggySession
    from core.broker import Broker, BrokerConfig
    from core.log import LogConfig

    broker = Broker.open(tmp_path / "data", BrokerConfig(log=LogConfig(fsync="never")))
    try:
        s = IggySession(broker, client_id=5, address="10.0.0.1:4000", transport=TRANSPORT_QUIC)
        assert models.client_json(s, True) == {"client_id": 5, "user_id": None, "address": "10.0.0.1:4000",
                                               "transport": "QUIC", "consumer_groups_count": 0,
                                               "consumer_groups": []}
        s.user = broker.meta.users.list_users()[0]  # root: id 0 on this API, not the null of "not logged in"
        assert models.client_json(s, False)["user_id"] == 0 and "consumer_groups" not in models.client_json(s, False)
        broker.create_stream("s")
        broker.create_topic("s", "t", partitions=1)
        broker.consumers.create_group("s", "t", "g")
        broker.consumers.join_group("s", "t", "g", 5)
        details = models.client_json(s, True)
        assert details["consumer_groups_count"] == 1
        assert details["consumer_groups"] == [{"stream_id": 0, "topic_id": 0, "group_id": 0}]
        assert models.client_json(s, False)["consumer_groups_count"] == 1
    finally:
        broker.close()


async def test_clients_routes(tmp_path):
    import trio
    from http_helpers import TEST_LIMIT_S, client, gateway, login

    with trio.fail_after(TEST_LIMIT_S):
        async with gateway(tmp_path) as port, client(port) as c:
            assert (await c.get("/clients")).status_code == 401
            headers = {"authorization": f"Bearer {await login(c)}"}
            r = await c.get("/clients", headers=headers)
            assert r.status_code == 200 and r.json() == []  # HTTP requests are not Iggy clients
            assert (await c.get("/clients/7", headers=headers)).status_code == 404
            r = await c.get("/clients/x", headers=headers)
            assert r.status_code == 400 and r.json()["field"] == "client_id"
