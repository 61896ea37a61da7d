"""adapters/http/forms.py: HTTP JSON forms derived from the Iggy reply records."""

from __future__ import annotations

import pytest

from adapters.http import forms
from adapters.iggy import replies as R
from adapters.iggy.table import SpecError


def test_form_refuses_a_key_that_is_neither_field_nor_extra():
    with pytest.raises(SpecError):
        forms.JsonForm(R.GROUP, ("id", "nonsense"))
    with pytest.raises(SpecError):
        forms.JsonForm(R.GROUP, ("id",), convert={"name": str})


def test_forms_apply_only_the_declared_differences():
    member = forms.MEMBER.json(R.MEMBER.make(id=7, partitions=(0, 2)))
    assert member == {"id": 7, "partitions_count": 2, "partitions": [1, 3]}
    assert forms.PAT.json(R.PAT_INFO.make(name="pat", expiry_at=0)) == {"name": "pat", "expiry_at": None}
    group = R.GROUP.make(id=0, partitions_count=1, members_count=0, name="g")
    assert list(forms.GROUP.json(group)) == ["id", "name", "partitions_count", "members_count"]
    assert forms.GROUP.json(group, members=[])["members"] == []
    assert forms.PARTITION.schema()["segments_count"] == {"type": "integer", "minimum": 0, "maximum": 2**32 - 1}
