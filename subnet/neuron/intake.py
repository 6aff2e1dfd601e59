"""The validator's intake of one window: the uploads it fetches and checks, and the late ones.

On a commit-reveal lane only the payloads committed in this validator's snapshot
(``commits.CommitSnapshot``: the commits read before the reveal opened) are fetched; a miner
without a commit in it is missing (or late), one with a malformed commit rejected. With no
snapshot (not polling before the reveal opened: restarted, or far behind) it cannot tell a copy
in time from an honest upload and scores nobody. One that missed the deadline tick still counts
the commits it had not read as missing, as it would an upload it could not read: staying silent
on them would let a miner keep its moving score without uploading, and one colluding validator
set its merge weight. Off commit-reveal, every miner's upload is fetched (upload order is the
validator's own observation: ``arrivals.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from loguru import logger

from ..compression import Compressor, Payload
from ..storage.keys import ObjectKind
from .commits import CommitSnapshot
from .replica import Replica
from .runtime import Runtime
from .uploads import WindowUploads, collect_uploads, modified_at


@dataclass
class Collected:
    """A window's uploads, the commits they were checked against (None off commit-reveal), and
    the miners whose commit this validator failed to read."""

    got: WindowUploads
    commits: dict[str, str] | None = None
    unreadable: set[str] = field(default_factory=set)


class Intake:
    """Collects a window's uploads on the scored lane (the module doc)."""

    def __init__(
        self,
        rt: Runtime,
        lane: str,
        snapshot: CommitSnapshot,
        replica: Replica,
        compressor: Compressor,
    ) -> None:
        """``lane``: the gradient lane scored; ``snapshot``: its commits (read by the
        validator's observations before the reveal; used on a commit-reveal lane only)."""
        self.rt = rt
        self.lane = lane
        self.commit_reveal = rt.lane(lane).commit_reveal
        self.snapshot = snapshot
        self.replica = replica
        self.compressor = compressor

    def collect(
        self,
        window: int,
        miners: list[str],
        assigned: Callable[[str], list[int]],
        measure: Callable[[Payload], object] | None = None,
    ) -> Collected | None:
        """The window's uploads (``assigned``: each sender's sample ids, its receipt checked
        against them; ``measure``: what each payload is validated and read by,
        ``collect_uploads``); None when this validator cannot judge the window at all."""
        commits, refused, unreadable = None, {}, set()
        if self.commit_reveal:
            snapshot = self.snapshot.of(window)
            failures = self.snapshot.failed(window)
            self.snapshot.forget(window)
            if snapshot is None:
                logger.warning(
                    "window {}: no commit snapshot from before the reveal (this "
                    "validator was not polling then); not scoring it",
                    window,
                )
                return None
            commits, refused = snapshot.digests, snapshot.refused
            unreadable = failures - set(commits)
            absent = set(miners) - set(commits)
            if not snapshot.complete and absent:
                logger.warning(
                    "window {}: this validator's last read of the commits ran past the "
                    "deadline; {} miner(s) whose commit it had not read count as "
                    "missing",
                    window,
                    len(absent),
                )
        uncommitted = set() if commits is None else set(miners) - set(commits)
        got = collect_uploads(
            self.rt,
            window,
            [hk for hk in miners if hk not in uncommitted],
            base_version=self.replica.version,
            compressor=self.compressor,
            shapes={k: tuple(v.shape) for k, v in self.replica.state.items()},
            assigned=assigned,
            lane=self.lane,
            commits=commits,
            measure=measure,
        )
        refused = {hk: why for hk, why in refused.items() if hk in uncommitted}
        got.missing |= uncommitted - set(refused)
        got.rejected |= refused
        return Collected(got, commits, unreadable)

    def late(self, window: int, missing: set[str], commits: dict[str, str] | None) -> set[str]:
        """Uploads absent at the deadline that exist now: they arrived late. On a commit-reveal
        lane: a commit written after the snapshot, or a reveal after the validator looked."""
        inbox = self.rt.inbox(self.lane)

        def there(hk: str) -> bool:
            kind = (
                ObjectKind.GRADIENT
                if commits is None or hk in commits
                else ObjectKind.GRADIENT_COMMIT
            )
            reader = self.rt.readers.get(hk)
            key = inbox.key(kind, window, hk)
            return reader is not None and modified_at(reader, key) is not None

        return {hk for hk in missing if there(hk)}
