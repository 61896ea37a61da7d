"""The marker convention of tests/docs/test_doc_blocks.py, on small made-up pages."""

from __future__ import annotations

import pytest

from doc_blocks import DocBlockError, all_blocks, parse_page

PAGE = '''# A page

<!-- test: first slow runs-with=apache-iggy==0.9.0 -->
```python
# pip install apache-iggy==0.9.0 nats-py   (prose after the requirements)
print("hi")   # prints: hi
```

```python
print("not marked")
```

<!-- test: second after=first -->
```sh
echo one      # prints: one
# prints: two words
```
'''


def _page(tmp_path, text, name="page.md"):
    docs = tmp_path / "docs"
    docs.mkdir(exist_ok=True)
    (docs / name).write_text(text)
    return docs


def test_marked_blocks_with_their_options_prints_and_installs(tmp_path, monkeypatch):
    import doc_blocks
    monkeypatch.setattr(doc_blocks, "ROOT", tmp_path)
    first, second = all_blocks(_page(tmp_path, PAGE))
    assert (first.name, first.lang, first.line, first.page) == ("first", "python", 4, "docs/page.md")
    assert first.flags == {"slow"} and first.runs_with == "apache-iggy==0.9.0" and first.after is None
    assert first.prints == ("hi",)
    assert first.installs == (("apache-iggy", "0.9.0"), ("nats-py", None))
    assert first.code.startswith("# pip install") and "not marked" not in first.code
    assert (second.lang, second.after, second.prints, second.installs) == ("sh", "first", ("one", "two words"), ())


@pytest.mark.parametrize("text, error", [
    ("<!-- test: a -->\ntext\n```python\nx\n```\n", "right before a ```python or ```sh fence"),
    ("<!-- test: a -->\n```js\nx\n```\n", "right before a ```python or ```sh fence"),
    ("<!-- test: a -->\n```python\nx\n", "no closing fence"),
    ("<!-- test: a fast -->\n```python\nx\n```\n", "unknown test marker option 'fast'"),
    ("<!-- test: a -->\n```sh\nx\n```\n<!-- test: a -->\n```sh\ny\n```\n", "is used at docs/page.md:2 already"),
    ("<!-- test: a after=b -->\n```sh\nx\n```\n", "after=b names no marked block"),
])
def test_a_bad_marker_is_refused_with_its_place(tmp_path, monkeypatch, text, error):
    import doc_blocks
    monkeypatch.setattr(doc_blocks, "ROOT", tmp_path)
    with pytest.raises(DocBlockError, match="docs/page.md:") as exc:
        all_blocks(_page(tmp_path, text))
    assert error in str(exc.value)


def test_the_real_pages_parse(tmp_path):
    from doc_blocks import DOCS
    assert sum(len(parse_page(p)) for p in DOCS.glob("*.md")) >= 10
