"""Bytes per peer per round by role, both ways, against DDP's ring (known answers)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from subnet.monitor.report import load_run, render_page, traffic
from subnet.monitor.report.units import fmt_bytes

MINERS = ["m1", "m2"]


def _write(run_dir: Path, name: str, records: list[dict]) -> None:
    folder = run_dir / "state" / name
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "metrics.jsonl").open("a") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")


def _traffic_run(tmp_path: Path) -> Path:
    """Two miners over two windows, one validator, one holder with two versions."""
    run_dir = tmp_path / "run"
    for i, hk in enumerate(MINERS):
        _write(run_dir, f"miner-{hk}", [
            {"event": "train", "role": "miner", "hotkey": hk, "t": 10 + w, "window": w,
             "bytes_up": 1_000 + i, "bytes_down": 5_000 * (w + 1)} for w in (0, 1)])  # fmt: skip
    _write(run_dir, "validator-v1", [
        {"event": "scores", "role": "validator", "hotkey": "v1", "t": 20 + w, "window": w,
         "verdicts": {}, "bytes_up": 300, "bytes_down": 4_000} for w in (0, 1)])  # fmt: skip
    _write(run_dir, "holder-h", [
        {"event": "version", "role": "holder", "hotkey": "h", "t": 30 + v, "window": v - 1,
         "version": v, "contributors": {hk: 0.5 for hk in MINERS},
         "ddp_ring_bytes_per_worker": 1_000_000 * v, "bytes_up": 9_000, "bytes_down": 2_500}
        for v in (1, 2)])  # fmt: skip
    return run_dir


def test_per_role_means_per_peer_per_round(tmp_path: Path) -> None:
    run = load_run(_traffic_run(tmp_path))
    rows = {r.role: r for r in traffic.by_role(run)}
    assert list(rows) == ["miner", "validator", "holder"]
    m = rows["miner"]
    assert (m.peers, m.records, m.up, m.down) == (2, 4, 4_002, 30_000)
    assert m.up_per_round == 1_000.5 and m.down_per_round == 7_500
    assert (m.first_up, m.first_down, m.steady_rounds) == (2_001, 10_000, 2)
    assert m.steady_up == 1_000.5 and m.steady_down == 10_000  # window 1 only
    assert rows["validator"].up_per_round == 300 and rows["validator"].down_per_round == 4_000
    assert rows["holder"].both_per_round == 11_500
    assert traffic.ddp_ring_per_round(run) == 1_500_000  # mean of 1 MB and 2 MB, each way
    assert traffic.miner_saving(run) == 2 * 1_500_000 / 8_500.5
    line = traffic.describe(run, fmt_bytes)
    assert (
        "miner 1.00 kB up / 7.50 kB down (1.00 kB / 10.0 kB after its first)" in line
        and "holder 9.00 kB up / 2.50 kB down" in line
    )
    # one figure, as the page's headline: per worker per round, up + down
    assert "moves 3.00 MB up + down a round, a miner 8.50 kB: 353x less" in line, line


def test_page_bytes_section_and_card(tmp_path: Path) -> None:
    page = render_page(load_run(_traffic_run(tmp_path)), now=100)
    text = re.sub(r"<[^>]+>", " ", page)
    assert "Bytes per peer per round" in text and "ring all-reduce" in text
    assert "353×" in text and "models and data down, 8.50 kB a round" in text
    assert (
        "gradients, 3.00 MB" in text
        and "up: score reports, check notices; down: every gradient it scores, the answers" in text
    )
    for cell in ("1.00 kB", "7.50 kB", "4.00 kB", "11.5 kB", "1.50 MB"):
        assert cell in text, cell


def test_no_meter_counts_no_section(tmp_path: Path) -> None:
    run = load_run(tmp_path)
    assert traffic.by_role(run) == [] and traffic.miner_saving(run) is None
    one = traffic.RoleTraffic("miner", 1, 1, 10, 20, 10, 20)
    assert one.steady_up is None and one.steady_down is None  # one round: nothing after it
    assert "Bytes per peer per round" not in render_page(run)


def test_verification_bytes_have_their_own_line(tmp_path: Path) -> None:
    """A checked miner's answer and the validator's read of it: counted inside the role
    figures (the meters) and said apart, on the page and in the demo's summary line."""
    run_dir = _traffic_run(tmp_path)
    assert traffic.verification(load_run(run_dir)) is None  # nothing checked: no line
    _write(run_dir, "miner-m1", [{"event": "answered", "role": "miner", "hotkey": "m1", "t": 12,
                                  "window": 0, "lane": "grads", "bytes": 2_000}])  # fmt: skip
    _write(run_dir, "validator-v1", [{"event": "check", "role": "validator", "hotkey": "v1",
                                      "t": 22, "window": 0, "ok": True, "bytes": 1_900}])  # fmt: skip
    run = load_run(run_dir)
    line = traffic.verification(run)
    assert line == (
        "verification (checks of training): miners wrote 1 answer(s), 2.00 kB up; validators "
        "read 1, 1.90 kB down (50.0 % of the miners' bytes up)"
    )
    assert line in traffic.describe(run, fmt_bytes).splitlines()
    assert "Verification (checks of training): miners wrote 1 answer(s)" in render_page(
        run, now=100
    )
