"""The run page tells the truth about a stalled run: empty windows, statuses, verdicts, tokens."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from subnet.monitor.report import headline, load_run, render_page, roster, round_rows

ROOT = Path(__file__).resolve().parents[2]
M1, M2, V1, H = "5Mone", "5Mtwo", "5Vone", "5Hold"


def write(folder: Path, name: str, records: list[dict]) -> None:
    path = folder / name / "metrics.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


@pytest.fixture
def stalled(tmp_path: Path) -> Path:
    """Rounds merged in windows 1-3; from window 4 to 10 every upload lands late."""
    state = tmp_path / "state"
    holder = [{"t": 1, "event": "version", "role": "holder", "hotkey": H, "window": -1,
               "version": 0, "heldout_loss": 9.0}]  # fmt: skip
    miners = {M1: [], M2: []}
    scores, uploads = [], []
    for w in range(1, 11):
        ok = w <= 3
        for hk, rec in miners.items():
            rec.append({"t": 10 * w, "event": "train", "role": "miner", "hotkey": hk, "window": w,
                        "steps": 20, "tokens": 1000, "loss": 8.0 - w / 10, "seconds": 2.0})  # fmt: skip
            rec.append({"t": 10 * w + 1, "event": "upload", "role": "miner", "hotkey": hk,
                        "window": w, "late": not ok, "seconds_to_deadline": 1.0 if ok else -2.0})  # fmt: skip
        verdict = ["scored", 0.01] if ok else ["late", 0.0]
        scores.append({"t": 10 * w + 3, "event": "scores", "role": "validator", "hotkey": V1,
                       "window": w, "verdicts": {M1: verdict, M2: verdict if ok else ["rejected", 0.0]},
                       "details": {} if ok else {M2: "bad_receipt"}, "moving": {}})  # fmt: skip
        uploads.append({"t": 10 * w + 4, "event": "uploads", "role": "holder", "hotkey": H,
                        "window": w, "verdicts": {M1: "accepted", M2: "accepted"},
                        "merged": [M1, M2] if ok else [], "empty": "" if ok else "no positive score"})  # fmt: skip
        if ok:
            holder.append({"t": 10 * w + 5, "event": "version", "role": "holder", "hotkey": H,
                           "window": w, "version": w, "heldout_loss": 9.0 - w / 10,
                           "contributors": {M1: 0.5, M2: 0.5}, "tokens": 2000, "bytes": 200,
                           "ddp_bytes": 2_000_000})  # fmt: skip
    weights = [{"t": 50, "event": "weights", "role": "validator", "hotkey": V1, "block": 9,
                "ok": True, "reason": "included", "weights": {"2": 0.75, "3": 0.25},
                "bytes_up": 300, "bytes_down": 1200}]  # fmt: skip
    write(state, "holder-5Hold", holder + uploads)
    write(state, "validator-5Vone", scores + weights)
    write(state, "miner-5Mone", miners[M1])
    write(state, "miner-5Mtwo", miners[M2])
    (tmp_path / "chain.json").write_text(json.dumps({M1: {"uid": 2, "incentive": 0.7,
                                                          "dividends": 0.0}, M2: {"uid": 3}}))  # fmt: skip
    return tmp_path


def test_headline_shows_the_stall(stalled):
    h = headline(load_run(stalled))
    assert (h.rounds, h.last_round_window, h.latest_window) == (3, 3, 10)
    assert h.windows_without_round == 7
    assert h.empty_windows == [4, 5, 6, 7, 8, 9, 10]
    assert h.late_uploads == 14
    assert (h.tokens, h.tokens_trained) == (6000, 20_000)  # merged vs trained, never mixed


def test_roster_statuses_verdicts_loss_weights(stalled):
    rows = {r.hotkey: r for r in roster(load_run(stalled))}
    assert rows[M1].status == "not merged" and rows[M2].status == "not merged"
    assert rows[H].status == "stalled" and rows[V1].status == "active"
    assert rows[M1].verdicts == {"scored": 3, "late": 7} and rows[M1].last_verdict == "late"
    assert rows[M2].verdicts == {"scored": 3, "rejected": 7}
    assert rows[M2].last_verdict == "rejected (bad_receipt)"
    assert rows[M1].loss == pytest.approx(7.0)  # the newest training loss
    assert (rows[M1].weight, rows[M2].weight) == (0.75, 0.25)
    assert rows[M1].incentive == 0.7 and rows[M2].incentive is None
    assert rows[V1].traffic == (300, 1200)
    # the roster's merged tokens add up to the headline's
    assert sum(r.tokens_merged or 0 for r in rows.values()) == headline(load_run(stalled)).tokens
    assert sum(r.tokens or 0 for r in rows.values()) == 20_000


def test_rounds_count_nodes_and_bytes_over_the_merged_uploads(stalled):
    rows = round_rows(load_run(stalled))
    assert [(r.round, r.nodes, r.bytes, r.ddp_bytes) for r in rows][-1] == (1, 2, 200, 2_000_000)


def test_page_says_it(stalled):
    page = render_page(load_run(stalled), now=0)
    assert "No new round for 7 windows" in page and "last round merged window 3" in page
    assert "Empty windows (nothing to merge): 4-10" in page
    assert "14 miner upload(s) landed after the upload deadline" in page
    assert "not merged" in page and "stalled" in page and "rejected (bad_receipt)" in page
    assert "of 20,000 trained (14,000 not merged)" in page
    assert "bytes up / down" in page and "incentive" in page


def test_healthy_run_has_no_banner(stalled):
    run = load_run(stalled)
    run.windows = [w for w in run.windows if w.window <= 3]
    run.uploads = [u for u in run.uploads if u.window <= 3]
    run.trains = [t for t in run.trains if t.window <= 3]
    run.scores = [s for s in run.scores if s.window <= 3]
    assert "No new round" not in render_page(run, now=0)
    assert {r.status for r in roster(run)} == {"active"}


def test_report_on_a_hand_started_state_folder(stalled, tmp_path):
    """Neurons started by hand keep metrics in --neuron.state_dir/<role>-<hotkey>/."""
    state = stalled / "state"
    out = tmp_path / "page.html"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "report.py"), str(state), "--out", str(out)],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "No new round for 7 windows" in out.read_text()
