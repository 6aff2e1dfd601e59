"""Known-answer tests for the run page's figures, and for reading a run still in progress."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from subnet.monitor.report import headline, load_run, loss_curve, roster, round_rows
from subnet.monitor.report.units import fmt_bytes, fmt_int, fmt_ratio, fmt_seconds, fmt_share

FIXTURE_RUN = Path(__file__).parent / "fixtures" / "run"
MINER1 = "5DAAnrj7VHTznn2AWBemMuyBwZWs6FNFjdyVXUeYum3PTXFy"


def test_load_reads_every_neuron() -> None:
    run = load_run(FIXTURE_RUN)
    assert run.name == "beam-demo-fixture" and run.netuid == 3 and run.n_params == 2_400_000
    assert [v.version for v in run.versions] == [0, 1, 2, 3, 4]
    assert len(run.trains) == 12 and len(run.scores) == 7 and len(run.weights) == 2
    assert [(f.window, f.reason) for f in run.failures] == [(2, "StorageError")]
    assert run.versions[1].contributors[MINER1] == 0.4


def test_headline_known_answers() -> None:
    h = headline(load_run(FIXTURE_RUN))
    assert h.final_loss == 6.41 and h.initial_loss == 10.84
    assert h.rounds == 4
    assert h.nodes == 6 and h.nodes_by_role == {"holder": 1, "validator": 2, "miner": 3}
    assert h.tokens == 130_560
    assert h.throughput == pytest.approx(130_560 / 136)
    assert (h.bytes, h.ddp_bytes) == (400_000, 2_448_000_000)
    assert h.saved == pytest.approx(6120)
    assert h.failed_windows == 1


def test_roster_known_answers() -> None:
    rows = {r.name: r for r in roster(load_run(FIXTURE_RUN))}
    assert [r.name for r in roster(load_run(FIXTURE_RUN))] == [
        "holder", "validator1", "validator2", "miner1", "miner2", "miner3"
    ]  # fmt: skip
    expected = {  # status, rounds, tokens, tokens/s, share
        "miner1": ("active", 4, 76_800, 2000.0, (0.4 + 0.5 + 0.5 + 0.45) / 4),
        "miner2": ("active", 4, 76_800, 2500.0, (0.4 + 0.5 + 0.5 + 0.55) / 4),
        "miner3": ("idle", 1, 15_360, 1000.0, 0.2 / 4),
    }
    for name, (status, rounds, tokens, per_s, share) in expected.items():
        r = rows[name]
        assert (r.status, r.rounds, r.tokens) == (status, rounds, tokens), name
        assert r.tokens_per_s == pytest.approx(per_s) and r.share == pytest.approx(share), name
    assert sum(rows[m].share or 0 for m in expected) == pytest.approx(1.0)
    assert (rows["validator1"].rounds, rows["validator2"].rounds, rows["holder"].rounds) == (
        4,
        3,
        4,
    )
    assert all(rows[n].status == "active" for n in ("holder", "validator1", "validator2"))
    assert rows["holder"].share is None and rows["validator1"].tokens is None


def test_rounds_known_answers() -> None:
    run = load_run(FIXTURE_RUN)
    rows = round_rows(run)
    assert [r.round for r in rows] == [4, 3, 2, 1]  # newest first
    first = rows[-1]
    assert (first.window, first.nodes, first.bytes, first.ddp_bytes) == (0, 3, 120_000, 720_000_000)
    assert first.started == pytest.approx(1_700_000_010)
    assert first.compute_s == pytest.approx((7.68 + 6.144 + 7.68) / 3)
    assert first.sync_s == pytest.approx(0.5)
    # one DDP worker's ring both ways: the fixture logged the total over its 3 workers
    assert first.ddp_worker == 2 * 720_000_000 // 3 and first.loss == 9.12
    last = rows[0]
    assert (last.nodes, last.compute_s, last.sync_s) == (
        2,
        pytest.approx(6.912),
        pytest.approx(0.4),
    )
    assert last.ddp_worker == 2 * last.ddp_bytes // 2
    assert [r.round for r in round_rows(run, last=2)] == [4, 3]
    assert loss_curve(run) == [(1, 9.12), (2, 7.85), (3, 6.93), (4, 6.41)]


def test_run_in_progress_reads_what_exists(run_dir: Path) -> None:
    """A half-written line, a missing run.json and records without optional fields."""
    (run_dir / "run.json").unlink()
    holder = next(run_dir.glob("state/holder-*/metrics.jsonl"))
    with holder.open("a") as f:
        f.write('{"event": "version", "window": 4, "version": 5}\n{"event": "vers')
    run = load_run(run_dir)
    assert run.name == "run" and run.started is None and len(run.participants) == 6
    assert run.participants[MINER1].name == MINER1[:8]  # no names without run.json
    h = headline(run)
    assert h.rounds == 5 and h.final_loss == 6.41 and h.tokens == 130_560
    newest = round_rows(run)[0]
    assert (newest.round, newest.nodes, newest.bytes, newest.loss) == (5, 0, None, None)
    assert newest.compute_s == pytest.approx(6.912)  # miners 1 and 2 trained window 4


def test_empty_run_folder(tmp_path: Path) -> None:
    run = load_run(tmp_path)
    h = headline(run)
    assert (h.rounds, h.nodes, h.tokens, h.final_loss, h.throughput, h.saved) == (
        0, 0, 0, None, None, None
    )  # fmt: skip
    assert roster(run) == [] and round_rows(run) == [] and loss_curve(run) == []


def test_only_initial_model(tmp_path: Path) -> None:
    (tmp_path / "state" / "holder-x").mkdir(parents=True)
    record = {"t": 5, "event": "version", "role": "holder", "hotkey": "5Hold", "window": -1,
              "version": 0, "heldout_loss": 10.8}  # fmt: skip
    (tmp_path / "state" / "holder-x" / "metrics.jsonl").write_text(json.dumps(record) + "\n")
    run = load_run(tmp_path)
    h = headline(run)
    assert (h.rounds, h.final_loss, h.initial_loss, h.throughput) == (0, 10.8, 10.8, None)
    assert [r.status for r in roster(run)] == ["idle"]


def test_a_gossip_run_shows_tokens_throughput_and_rounds(tmp_path: Path) -> None:
    """Workers train three rounds; the collector merges their whole final models once, a merge
    that counts no tokens of its own: the page counts every token the merged models trained."""
    workers = {"5Work1": "w1", "5Work2": "w2"}
    files = {
        "collector": [
            {
                "t": 100,
                "event": "version",
                "role": "holder",
                "hotkey": "5Coll",
                "window": -1,
                "version": 0,
                "heldout_loss": 9.0,
            },
            {
                "t": 160,
                "event": "version",
                "role": "holder",
                "hotkey": "5Coll",
                "window": 2,
                "version": 1,
                "heldout_loss": 8.0,
                "contributors": {hk: 0.5 for hk in workers},
            },
        ]
    }
    for hk, name in workers.items():
        files[name] = [
            {
                "t": 110 + 20 * w,
                "event": "train",
                "role": "miner",
                "hotkey": hk,
                "window": w,
                "steps": 2,
                "tokens": 500,
                "loss": 6.0,
                "seconds": 5.0,
            }
            for w in range(3)
        ]
    for name, records in files.items():
        (tmp_path / "state" / name).mkdir(parents=True)
        lines = "".join(json.dumps(r) + "\n" for r in records)
        (tmp_path / "state" / name / "metrics.jsonl").write_text(lines)
    run = load_run(tmp_path)
    h = headline(run)
    assert (h.rounds, h.rounds_trained, h.tokens, h.tokens_trained) == (1, 3, 3000, 3000)
    assert h.throughput == pytest.approx(3000 / 60)
    rows = {r.name: r for r in roster(run) if r.role == "miner"}
    assert {(r.tokens, r.tokens_merged, r.rounds) for r in rows.values()} == {(1500, 1500, 1)}


@pytest.mark.parametrize(
    ("formatter", "value", "text"),
    [
        (fmt_bytes, 512, "512 B"), (fmt_bytes, 80_000, "80.0 kB"), (fmt_bytes, 120_000, "120 kB"),
        (fmt_bytes, 2_448_000_000, "2.45 GB"), (fmt_bytes, None, "–"),
        (fmt_seconds, 0.4, "0.40 s"), (fmt_seconds, 12.34, "12.3 s"), (fmt_seconds, 185, "3m 05s"),
        (fmt_seconds, 3720, "1h 02m"), (fmt_int, 130_560, "130,560"), (fmt_int, 959.6, "960"),
        (fmt_ratio, 6120.0, "6,120×"), (fmt_ratio, 12.5, "12.5×"), (fmt_share, 0.05, "5.0%"),
    ],
)  # fmt: skip
def test_units(formatter: object, value: float | None, text: str) -> None:
    assert formatter(value) == text  # type: ignore[operator]
