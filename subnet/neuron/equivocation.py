"""Equivocation: a sender proven, by its own signatures, to have signed two payloads for a window.

An honest miner signs one gradient envelope a window and writes it once (``put_if_absent``; on
a commit-reveal lane it even keeps the envelope across a restart). One that rewrites its upload
after the validators scored it, or serves the holder other bytes than it served them (the
switcher of ``scripts/benchmarks/attackers.py``), gets no merge weight for those bytes: the
holder merges a score only into the payload it was given for (``scoring.report.bind_scores``).
But the validators paid it for the honest bytes they scored, so it was paid for work that was
never merged.

The holder names such a sender in the manifest of the next version it publishes, with the
**seal** of the bytes it read (``wire.verify_seal``: the sender's signed header, no payload). A validator
that scored other bytes from that sender for that window holds the sender's signature on them
too; two valid signatures of one hotkey on different payload digests for the same run, lane and
window prove the equivocation without trusting the holder (a seal nobody signed fails
verification, and the validator compares it with what it verified itself). The sender is then
banned from this validator's scores for as long as it stays registered: its moving score and
track record go, and each later upload is ``rejected`` with ``equivocated``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from loguru import logger

from ..storage.keys import ObjectKind
from ..versions.manifest import MAX_EQUIVOCATIONS, ModelManifest
from ..wire import Expected, Rejected, envelope_header, verify_seal

KEEP_WINDOWS = 8  # windows of scored digests kept: a seal of an older window convicts nobody


class Caught:
    """The holder's side: the senders a report contradicted, until a version names them.

    ``pending``: hotkey -> (window, how many reports contradicted it, hex seal of the bytes the
    holder read).
    """

    def __init__(self) -> None:
        self.pending: dict[str, tuple[int, int, str]] = {}

    def add(self, window: int, votes: Mapping[str, int], seals: Mapping[str, bytes]) -> None:
        """Keep the seal of each sender ``votes`` names (with how many reports contradicted it),
        and drop what no validator could check any more (older than ``KEEP_WINDOWS``). A
        verified envelope's seal always fits a manifest (``wire.envelope.SEAL_BYTES``)."""
        self.pending = {hk: c for hk, c in self.pending.items() if c[0] > window - KEEP_WINDOWS}
        for hk, n in votes.items():
            seal = seals.get(hk, b"")
            if seal and n > self.pending.get(hk, (0, 0, ""))[1]:
                self.pending[hk] = (window, n, seal.hex())

    def naming(self) -> dict[str, str]:
        """The seals the next version names: the senders most reports contradict first (one
        validator's false digests cannot crowd out what every other validator saw); the rest
        wait for the version after."""
        ranked = sorted(self.pending.items(), key=lambda item: (-item[1][1], item[0]))
        return {hk: c[2] for hk, c in ranked[:MAX_EQUIVOCATIONS]}

    def named(self, hotkeys: Iterable[str]) -> None:
        """Forget the senders a published version named."""
        done = set(hotkeys)
        self.pending = {hk: c for hk, c in self.pending.items() if hk not in done}

    def state_dict(self) -> dict[str, list]:
        """What the holder's state file keeps (under ``caught``)."""
        return {hk: list(c) for hk, c in self.pending.items()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Load what :meth:`state_dict` returned."""
        self.pending = {str(hk): (int(w), int(n), str(seal)) for hk, (w, n, seal) in state.items()}


class Equivocations:
    """The digests a validator scored lately, and the senders it convicted."""

    def __init__(self, run: str, lane: str) -> None:
        self.run, self.lane = run, lane
        self.scored: dict[int, dict[str, str]] = {}  # window -> hotkey -> payload sha256
        self.banned: dict[str, int] = {}  # hotkey -> the window it equivocated in

    def record(self, window: int, digests: Mapping[str, str]) -> None:
        """Keep the payload digests scored in ``window`` (and in the ``KEEP_WINDOWS`` - 1 before)."""
        self.scored = {w: d for w, d in self.scored.items() if window - KEEP_WINDOWS < w < window}
        self.scored[window] = dict(digests)

    def convict(self, manifest: ModelManifest | None) -> list[tuple[str, int]]:
        """``(hotkey, window)`` of the senders the manifest's seals prove signed a payload other
        than the one this validator scored from them in the seal's window; each is banned. A seal
        that does not verify, is of a window not kept here, or names the digest scored here
        convicts nobody."""
        if manifest is None:
            return []
        convicted = []
        for hotkey, seal in sorted(manifest.equivocations.items()):
            if hotkey in self.banned:
                continue
            try:
                blob = bytes.fromhex(seal)
                window = envelope_header(blob).window  # which window it claims; verified next
                scored = self.scored.get(window, {}).get(hotkey)
                if scored is None:
                    continue
                expected = Expected(self.run, window, ObjectKind.GRADIENT, hotkey, lane=self.lane)
                header = verify_seal(blob, expected)
            except (Rejected, ValueError) as error:
                logger.info("holder's seal of {} does not prove anything: {}", hotkey[:8], error)
                continue
            if header.payload_sha256 == scored:
                continue
            self.banned[hotkey] = window
            convicted.append((hotkey, window))
            logger.warning(
                "{} signed two payloads for window {} ({} scored here, {} read by "
                "the holder): banned from this validator's scores",
                hotkey[:8],
                window,
                scored[:12],
                header.payload_sha256[:12],
            )
        return convicted

    def forget(self, registered: Iterable[str]) -> None:
        """Drop the bans of hotkeys no longer registered (a new registration starts clean)."""
        keep = set(registered)
        self.banned = {hk: w for hk, w in self.banned.items() if hk in keep}

    def state(self) -> dict[str, Any]:
        """What a validator's state file keeps."""
        return {"banned": self.banned, "scored": {str(w): d for w, d in self.scored.items()}}

    def restore(self, meta: Mapping[str, Any]) -> None:
        """Load what :meth:`state` saved."""
        self.banned = {str(k): int(v) for k, v in meta.get("banned", {}).items()}
        self.scored = {
            int(w): {str(k): str(v) for k, v in d.items()}
            for w, d in meta.get("scored", {}).items()
        }
