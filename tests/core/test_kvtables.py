"""core.kvtables: key-value tables (Pravega table segments) -- conditions,
atomicity, versions as positions, paging, delta reads, limits, persistence;
and a model-based property test against a dict."""

from __future__ import annotations

import itertools

import pytest
from broker_helpers import open_broker
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core import kvtables
from core.errors import (
    InvalidArgument,
    InvalidName,
    NotFound,
    PreconditionFailed,
    TableKeyBadVersion,
    TableKeyDoesNotExist,
    TableLengthMismatch,
    TableNotEmpty,
    TableNotFound,
)
from core.kvtables import NO_VERSION, NOT_EXISTS, KvTables
from core.metadb import MetaDb

ANY = NO_VERSION


@pytest.fixture
def tables(tmp_path):
    broker = open_broker(tmp_path)
    yield broker.tables
    broker.close()


@pytest.fixture(scope="module")
def fast_tables(tmp_path_factory):
    """One store for the property tests: synchronous=OFF (same semantics, no
    fsync per example); each example takes a fresh table name."""
    db = MetaDb(tmp_path_factory.mktemp("kv") / "metadata.sqlite", synchronous="OFF")
    db.migrate()
    yield KvTables(db)
    db.close()


_names = (f"t{i}" for i in itertools.count())


def fresh(tables: KvTables) -> str:
    name = next(_names)
    assert tables.create(name)
    return name


# -- tables ------------------------------------------------------------------------------
def test_create_exists_list_delete(tables):
    assert tables.create("scope/rg_kvtable/0.#epoch.0") is True
    assert tables.create("scope/rg_kvtable/0.#epoch.0") is False  # Pravega: SegmentAlreadyExists
    assert tables.create("scope/other_kvtable/0.#epoch.0")
    assert tables.create("é-table")
    assert tables.exists("é-table") and not tables.exists("nope")
    assert tables.list() == ["scope/other_kvtable/0.#epoch.0", "scope/rg_kvtable/0.#epoch.0", "é-table"]
    assert tables.list("scope/rg") == ["scope/rg_kvtable/0.#epoch.0"]
    assert tables.list("é") == ["é-table"] and tables.list("zzz") == []
    tables.delete("é-table", must_be_empty=True)
    assert not tables.exists("é-table")
    with pytest.raises(TableNotFound) as err:
        tables.delete("é-table", must_be_empty=False)
    assert isinstance(err.value, NotFound) and err.value.details["table"] == "é-table"


def test_delete_must_be_empty(tables):
    name = fresh(tables)
    tables.update(name, [(b"k", b"v", ANY)])
    with pytest.raises(TableNotEmpty):
        tables.delete(name, must_be_empty=True)
    assert tables.get(name, [b"k"]) == [(b"k", b"v", 0)]  # nothing deleted
    tables.delete(name, must_be_empty=False)
    assert tables.create(name)  # a new table under the old name starts empty, at length 0
    assert tables.info(name) == (0, 0) and tables.get(name, [b"k"]) == [None]


@pytest.mark.parametrize("call", [
    lambda t: t.update("nope", [(b"k", b"v", ANY)]),
    lambda t: t.remove("nope", [(b"k", ANY)]),
    lambda t: t.get("nope", [b"k"]),
    lambda t: t.entries("nope", None, 10),
    lambda t: t.delta("nope", 0, 10),
    lambda t: t.info("nope"),
])
def test_every_call_on_a_missing_table_is_table_not_found(tables, call):
    with pytest.raises(TableNotFound):
        call(tables)


# -- versions and conditions -------------------------------------------------------------
def test_versions_are_positions_that_only_grow(tables):
    name = fresh(tables)
    assert tables.update(name, [(b"key", b"value", ANY)]) == [0]  # the Rust client's own test sees 0 ...
    assert tables.update(name, [(b"key", b"value", ANY)]) == [1]  # ... then 1
    assert tables.update(name, [(b"a", b"1", NOT_EXISTS), (b"b", b"2", NOT_EXISTS)]) == [2, 3]
    assert tables.info(name) == (4, 3)
    tables.remove(name, [(b"a", 2)])
    assert tables.info(name) == (5, 2)  # a removal takes a position too
    assert tables.update(name, [(b"b", b"3", 3)]) == [5]


def test_condition_failures_name_the_key(tables):
    name = fresh(tables)
    tables.update(name, [(b"k", b"v", ANY)])
    with pytest.raises(TableKeyBadVersion) as bad:
        tables.update(name, [(b"k", b"x", NOT_EXISTS)])
    assert bad.value.details == {"table": name, "key": b"k", "expected": NOT_EXISTS, "actual": 0}
    with pytest.raises(TableKeyBadVersion) as bad:
        tables.update(name, [(b"k", b"x", 7)])
    assert (bad.value.details["expected"], bad.value.details["actual"]) == (7, 0)
    with pytest.raises(TableKeyDoesNotExist) as missing:
        tables.update(name, [(b"gone", b"x", 0)])
    assert missing.value.details["key"] == b"gone" and missing.value.details["actual"] is None
    # a subclass on purpose: a mapping that only knows BadVersion still answers it
    assert isinstance(missing.value, TableKeyBadVersion) and isinstance(missing.value, PreconditionFailed)
    with pytest.raises(TableKeyDoesNotExist):
        tables.remove(name, [(b"gone", 3)])
    with pytest.raises(TableKeyBadVersion):
        tables.remove(name, [(b"k", NOT_EXISTS)])
    assert tables.info(name) == (1, 1)


def test_expected_length_is_checked_after_the_keys(tables):
    name = fresh(tables)
    tables.update(name, [(b"k", b"v", ANY)])
    with pytest.raises(TableLengthMismatch) as err:
        tables.update(name, [(b"k", b"x", ANY)], expected_length=0)
    assert err.value.details == {"table": name, "expected": 0, "actual": 1}
    with pytest.raises(TableLengthMismatch):
        tables.remove(name, [(b"k", ANY)], expected_length=5)
    with pytest.raises(TableKeyBadVersion):  # both wrong: the key's condition is reported (upstream order)
        tables.update(name, [(b"k", b"x", 9)], expected_length=0)
    assert tables.update(name, [(b"k", b"x", 0)], expected_length=1) == [1]
    tables.remove(name, [(b"k", 1)], expected_length=2)
    assert tables.info(name) == (3, 0)


def test_one_failing_condition_changes_nothing(tables):
    name = fresh(tables)
    tables.update(name, [(b"a", b"1", ANY), (b"b", b"2", ANY)])
    before = (tables.info(name), tables.entries(name, None, 100))
    with pytest.raises(TableKeyBadVersion):
        tables.update(name, [(b"a", b"new", 0), (b"c", b"3", NOT_EXISTS), (b"b", b"new", 0)])  # b is at 1
    with pytest.raises(TableKeyBadVersion):
        tables.remove(name, [(b"a", ANY), (b"b", 0)])
    assert (tables.info(name), tables.entries(name, None, 100)) == before


def test_a_key_twice_in_one_update_sees_the_old_version_and_the_last_value_wins(tables):
    # The Rust synchronizer sends a map's version key once per inner key it inserts,
    # each with the version it knew (src/sync/synchronizer.rs increment_map_version).
    name = fresh(tables)
    tables.update(name, [(b"map", b"v0", ANY)])
    assert tables.update(name, [(b"map", b"v1", 0), (b"x", b"1", NOT_EXISTS), (b"map", b"v2", 0)]) == [1, 2, 3]
    assert tables.get(name, [b"map", b"x"]) == [(b"map", b"v2", 3), (b"x", b"1", 2)]
    assert tables.info(name) == (4, 2)


def test_removing_a_missing_key_unconditionally_does_nothing(tables):
    name = fresh(tables)
    tables.remove(name, [(b"never", ANY), (b"never", NOT_EXISTS)])
    assert tables.info(name) == (0, 0)
    tables.update(name, [(b"k", b"v", ANY)])
    tables.remove(name, [(b"k", ANY), (b"k", 0)])  # twice in one call: removed once, one position
    assert tables.info(name) == (2, 0)


def test_get_answers_in_the_order_asked(tables):
    name = fresh(tables)
    tables.update(name, [(b"a", b"1", ANY), (b"b", b"", ANY)])
    assert tables.get(name, [b"b", b"zz", b"a", b"b"]) == [(b"b", b"", 1), None, (b"a", b"1", 0), (b"b", b"", 1)]
    assert tables.get(name, []) == []


# -- paging -------------------------------------------------------------------------------
def test_entries_page_in_key_order(tables):
    name = fresh(tables)
    tables.update(name, [(bytes([c]), b"v" * c, ANY) for c in (5, 1, 255, 3, 0x80)])
    page = tables.entries(name, None, 2)
    assert [k for k, _, _ in page] == [b"\x01", b"\x03"]
    page = tables.entries(name, page[-1][0], 2)
    assert [k for k, _, _ in page] == [b"\x05", b"\x80"]
    assert [k for k, _, _ in tables.entries(name, b"\x80", 10)] == [b"\xff"]
    assert tables.entries(name, b"\xff", 10) == []
    assert [k for k, _, _ in tables.entries(name, b"\x02\x00", 1)] == [b"\x03"]  # any key may be "after"


def test_max_bytes_bounds_a_page_but_always_gives_one_entry(tables):
    name = fresh(tables)
    tables.update(name, [(b"a", b"x" * 100, ANY), (b"b", b"x" * 100, ANY), (b"c", b"x" * 100, ANY)])
    assert len(tables.entries(name, None, 10, max_bytes=250)) == 2
    assert len(tables.entries(name, None, 10, max_bytes=5)) == 1
    page, last, end = tables.delta(name, 0, 10, max_bytes=5)
    assert (len(page), last, end) == (1, 1, False)


def test_delta_returns_current_entries_in_version_order(tables):
    name = fresh(tables)
    tables.update(name, [(b"a", b"1", ANY), (b"b", b"1", ANY), (b"c", b"1", ANY)])  # versions 0 1 2
    tables.update(name, [(b"a", b"2", ANY)])  # a moves to 3
    tables.remove(name, [(b"b", ANY)])  # position 4; b is gone
    assert tables.delta(name, 0, 10) == ([(b"c", b"1", 2), (b"a", b"2", 3)], 4, True)
    assert tables.delta(name, 3, 10) == ([(b"a", b"2", 3)], 4, True)
    assert tables.delta(name, 4, 10) == ([], 4, True)  # removals are never returned
    assert tables.delta(name, 5, 10) == ([], 5, True)  # == length: nothing yet
    assert tables.delta(name, 0, 1) == ([(b"c", b"1", 2)], 3, False)
    with pytest.raises(InvalidArgument):
        tables.delta(name, 6, 10)  # past the length (upstream refuses it too)
    with pytest.raises(InvalidArgument):
        tables.delta(name, -1, 10)


def test_a_synchronizer_learns_a_removal_from_its_tombstone(tables):
    """The Rust synchronizer removes a key by first writing a tombstone value
    (insert_tombstone), then removing the key: a reader polling deltas sees the
    tombstone as an ordinary update, and nothing for the removal itself."""
    name = fresh(tables)
    tables.update(name, [(b"05group/reader1", b"owned-segments", ANY)])
    _page, position, _end = tables.delta(name, 0, 10)
    (version,) = tables.update(name, [(b"05group/reader1", b"tombstone", 0)])
    tables.remove(name, [(b"05group/reader1", version)])
    assert tables.delta(name, position, 10) == ([], position, True)
    # had the reader polled between the two steps, it would have seen the tombstone:
    tables.update(name, [(b"05group/reader2", b"x", ANY)])
    _page, position, _end = tables.delta(name, 0, 10)
    (version,) = tables.update(name, [(b"05group/reader2", b"tombstone", 3)])
    assert tables.delta(name, position, 10)[0] == [(b"05group/reader2", b"tombstone", version)]


def test_page_size_is_clamped(tables, monkeypatch):
    monkeypatch.setattr(kvtables, "MAX_PAGE_ENTRIES", 2)
    name = fresh(tables)
    tables.update(name, [(bytes([c]), b"", ANY) for c in range(1, 6)])
    assert len(tables.entries(name, None, 1000)) == 2
    assert tables.delta(name, 0, 1000)[1:] == (2, False)
    with pytest.raises(InvalidArgument):
        tables.entries(name, None, 0)


# -- limits --------------------------------------------------------------------------------
@pytest.mark.parametrize("entries", [
    [(b"", b"v", ANY)],
    [(b"k" * (kvtables.MAX_KEY_BYTES + 1), b"v", ANY)],
    [(b"k", b"v" * (kvtables.MAX_VALUE_BYTES + 1), ANY)],
    [(b"k", b"v", -2)],
    [(b"k", b"v", True)],
    [("k", b"v", ANY)],
    [(b"k", "v", ANY)],
    [(b"k", b"v")],
    b"kv",
])
def test_malformed_or_oversized_updates_are_invalid_argument(tables, entries):
    name = fresh(tables)
    with pytest.raises(InvalidArgument):
        tables.update(name, entries)
    assert tables.info(name) == (0, 0)


def test_largest_key_and_value_are_accepted(tables):
    name = fresh(tables)
    key, value = b"k" * kvtables.MAX_KEY_BYTES, b"v" * kvtables.MAX_VALUE_BYTES
    tables.update(name, [(bytearray(key), memoryview(value), ANY)])
    assert tables.get(name, [key]) == [(key, value, 0)]


def test_batch_count_and_bytes_are_bounded(tables, monkeypatch):
    name = fresh(tables)
    monkeypatch.setattr(kvtables, "MAX_BATCH_ENTRIES", 3)
    with pytest.raises(InvalidArgument):
        tables.update(name, [(bytes([i + 1]), b"", ANY) for i in range(4)])
    with pytest.raises(InvalidArgument):
        tables.get(name, [b"a"] * 4)
    assert tables.update(name, [(bytes([i + 1]), b"", ANY) for i in range(3)]) == [0, 1, 2]
    monkeypatch.setattr(kvtables, "MAX_BATCH_BYTES", 10)
    with pytest.raises(InvalidArgument):
        tables.update(name, [(b"abc", b"12345678", ANY)])
    with pytest.raises(InvalidArgument):
        tables.update(name, [(b"k", b"v", ANY)], expected_length=-5)


def test_table_count_and_name_length_are_bounded(tables, monkeypatch):
    monkeypatch.setattr(kvtables, "MAX_TABLES", 2)
    assert tables.create("one") and tables.create("two")
    with pytest.raises(InvalidArgument):
        tables.create("three")
    assert tables.create("two") is False  # an existing name is still just "exists"
    with pytest.raises(InvalidName):
        tables.create("")
    with pytest.raises(InvalidName):
        tables.create("n" * (kvtables.MAX_TABLE_NAME_BYTES + 1))
    with pytest.raises(InvalidArgument):
        tables.list(b"bytes")


# -- persistence ---------------------------------------------------------------------------
def test_tables_survive_broker_close_and_reopen(tmp_path):
    broker = open_broker(tmp_path)
    broker.tables.create("rg")
    broker.tables.update("rg", [(b"a", b"1", ANY), (b"b", b"2", ANY)])
    broker.tables.remove("rg", [(b"a", 0)])
    broker.close()
    again = open_broker(tmp_path)
    try:
        t = again.tables
        assert t.list() == ["rg"] and t.info("rg") == (3, 1)
        assert t.entries("rg", None, 10) == [(b"b", b"2", 1)]
        assert t.update("rg", [(b"b", b"3", 1)]) == [3]  # the counter continues where it was
    finally:
        again.close()


# -- properties ---------------------------------------------------------------------------
KEYS = st.sampled_from([b"a", b"b", b"c", b"d", b"\x00\xff"])


class Model:
    """A dict standing in for a table: what the docstring of core.kvtables promises."""

    def __init__(self) -> None:
        self.rows: dict[bytes, tuple[bytes, int]] = {}
        self.length = 0

    def _check(self, batch, expected_length):
        for key, want in batch:
            have = self.rows[key][1] if key in self.rows else None
            if want == NO_VERSION or (want == NOT_EXISTS and have is None) or want == have:
                continue
            raise (TableKeyDoesNotExist if have is None else TableKeyBadVersion)(key)
        if expected_length != -1 and expected_length != self.length:
            raise TableLengthMismatch()

    def update(self, entries, expected_length=-1):
        self._check([(k, want) for k, _v, want in entries], expected_length)
        versions = []
        for key, value, _want in entries:
            self.rows[key] = (value, self.length)
            versions.append(self.length)
            self.length += 1
        return versions

    def remove(self, keys, expected_length=-1):
        self._check(keys, expected_length)
        present = {k for k, _ in keys if k in self.rows}
        for key in present:
            del self.rows[key]
        self.length += len(present)

    def entries(self):
        return sorted((k, v, ver) for k, (v, ver) in self.rows.items())


def _condition(data, model: Model, key: bytes) -> int:
    kind = data.draw(st.sampled_from(["any", "absent", "current", "other"]))
    if kind == "any":
        return NO_VERSION
    if kind == "absent":
        return NOT_EXISTS
    if kind == "current" and key in model.rows:
        return model.rows[key][1]
    return data.draw(st.integers(0, model.length + 2))


def _length(data, model: Model) -> int:
    return data.draw(st.sampled_from([-1, -1, model.length, model.length + 1]))


def _run(data, tables: KvTables, name: str, model: Model, steps: int) -> None:
    for _ in range(steps):
        if data.draw(st.booleans()):
            keys = data.draw(st.lists(KEYS, min_size=1, max_size=4))
            entries = [(k, data.draw(st.binary(max_size=8)), _condition(data, model, k)) for k in keys]
            call, args = "update", (entries, _length(data, model))
        else:
            keys = data.draw(st.lists(KEYS, min_size=1, max_size=4))
            call, args = "remove", ([(k, _condition(data, model, k)) for k in keys], _length(data, model))
        try:
            want = getattr(model, call)(*args)
        except PreconditionFailed as exc:
            with pytest.raises(type(exc)) as got:
                getattr(tables, call)(name, *args)
            assert type(got.value) is type(exc)
            if exc.args and isinstance(exc.args[0], bytes):
                assert got.value.details["key"] == exc.args[0]
        else:
            assert getattr(tables, call)(name, *args) == want
        assert tables.entries(name, None, 100) == model.entries()
        assert tables.info(name) == (model.length, len(model.rows))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_tables_behave_like_a_dict_model(fast_tables, data):
    name = fresh(fast_tables)
    _run(data, fast_tables, name, Model(), data.draw(st.integers(1, 25)))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_delta_and_entries_paging_cover_every_entry_exactly_once(fast_tables, data):
    name = fresh(fast_tables)
    model = Model()
    _run(data, fast_tables, name, model, data.draw(st.integers(0, 15)))
    limit = data.draw(st.integers(1, 4))
    max_bytes = data.draw(st.none() | st.integers(0, 20))
    position, seen, versions = data.draw(st.integers(0, model.length)), [], []
    start = position
    while True:
        page, last, end = fast_tables.delta(name, position, limit, max_bytes=max_bytes)
        assert last == (page[-1][2] + 1 if page else position)
        seen += [k for k, _, _ in page]
        versions += [ver for _, _, ver in page]
        if end:
            break
        assert page  # not at the end: progress was made
        position = last
    assert versions == sorted(versions) and len(set(seen)) == len(seen)
    assert sorted(seen) == sorted(k for k, (_, ver) in model.rows.items() if ver >= start)
    keys, after = [], None
    while page := fast_tables.entries(name, after, limit, max_bytes=max_bytes):
        keys += [k for k, _, _ in page]
        after = page[-1][0]
    assert keys == sorted(model.rows)
