"""The live scale run's ledger: every miner upload matched to the holder's verdict."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from benchmarks.scale_live import account  # noqa: E402


def _write(root: Path, name: str, records: list[dict]) -> None:
    folder = root / "state" / name
    folder.mkdir(parents=True)
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def test_every_upload_is_accepted_refused_pending_or_flagged(tmp_path: Path) -> None:
    for m in ("a", "b", "c"):
        _write(tmp_path, f"miner-{m}", [{"event": "upload", "role": "miner", "hotkey": m,
                                         "window": w} for w in (4, 5, 6)])  # fmt: skip
    _write(tmp_path, "holder-h", [
        {"event": "uploads", "role": "holder", "hotkey": "h", "window": 4,
         "verdicts": {"a": "accepted", "b": "accepted", "c": "rejected:bad_signature"},
         "merged": ["a"]},
        {"event": "uploads", "role": "holder", "hotkey": "h", "window": 5,
         "verdicts": {"a": "accepted", "b": "missing"}},  # c uploaded, the holder never said
    ])  # fmt: skip
    _write(tmp_path, "validator-v", [{"event": "scores", "role": "validator", "hotkey": "v",
                                      "window": 4, "verdicts": {"a": ["scored", 1.0],
                                                                "c": ["rejected", 0.0]}}])  # fmt: skip
    got = account(tmp_path)
    assert got["uploads"] == 9 and got["judged_by_holder"] == 6
    assert got["holder_outcomes"] == {"accepted": 3, "missing": 1, "rejected:bad_signature": 1}
    assert got["unaccounted"] == ["c@5"]
    assert got["pending_at_stop"] == 3  # window 6 was not judged when the run stopped
    assert got["validator_verdicts"] == {"rejected": 1, "scored": 1}
    assert got["merged_by_window"] == {"4": 1, "5": 0}
