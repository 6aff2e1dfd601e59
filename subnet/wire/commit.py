"""Commit-reveal: a sender's signed promise of the upload it will publish after the deadline.

On a commit-reveal lane a miner writes, before the upload deadline, a signed envelope of kind
``gradient-commit`` holding only ``commit_digest(...)`` of the gradient envelope it is about to
send, and writes that gradient envelope (the reveal) only after the deadline. Readers take the
commits they read before the reveal opened and accept a reveal only if its signed payload digest
gives the same commit. So nobody can copy an upload in time: when the first payload becomes
readable every commit is already fixed, and a copied payload does not match its copier's commit.

The digest binds the sender, run, lane and window, and hides the payload's sha256 until the
reveal: a commit copied from another miner's bucket names a payload its copier does not have,
and proves nothing for anyone else's hotkey.
"""

from __future__ import annotations

import hashlib

COMMIT_DOMAIN = b"beam-commit-v1\x00"
MAX_COMMIT_BYTES = 4096  # a commit envelope is ~450 bytes; anything larger is refused unread


def commit_digest(run: str, lane: str, window: int, sender: str, payload_sha256: str) -> str:
    """Hex sha256 committing ``sender`` to the payload with ``payload_sha256`` for ``window``."""
    fields = "\x00".join((run, lane, str(int(window)), sender, payload_sha256))
    return hashlib.sha256(COMMIT_DOMAIN + fields.encode()).hexdigest()
