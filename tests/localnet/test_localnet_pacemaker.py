"""The pacemaker: block time from the work a run's neurons measured (rules, then against simnet)."""

from __future__ import annotations

import json
import threading
from collections import deque
from pathlib import Path

import pytest

from subnet.chain.simnet.server import SimnetServer
from subnet.config import WindowConfig
from subnet.localnet.pacemaker import (
    Need,
    Pacemaker,
    miner_need,
    next_block_time,
    skipped_need,
    step_need,
    typical,
    wait_windows,
)

WINDOW = WindowConfig(blocks=20, upload_deadline=10, report_deadline=16)


def test_a_step_needs_its_seconds_over_the_ticks_it_had_with_headroom() -> None:
    record = {
        "window": 4,
        "action": "score",
        "phase": "score",
        "offset": 11,
        "last_offset": 15,
        "seconds": 6.0,
    }
    need = step_need("validator1", record, headroom=1.5)
    assert need is not None and need.source == "validator1 score" and need.window == 4
    assert need.block_s == pytest.approx(1.5 * 6.0 / 4)  # 4 ticks: one is lost to polling
    assert "6.0 s from offset 11, due by offset 15" in need.detail
    late_start = step_need("v", {**record, "offset": 15}, headroom=1.0)
    assert late_start is not None and late_start.block_s == 6.0  # never divides by zero
    assert step_need("v", {"event": "step"}, 1.5) is None  # no timing: no need


def test_a_reveal_is_due_by_reveal_by_not_the_end_of_its_phase(tmp_path: Path) -> None:
    window = WindowConfig(blocks=30, upload_deadline=10, report_deadline=24, reveal_deadline=16)
    pace = Pacemaker(tmp_path, "sim://127.0.0.1:1", base_block_s=0.1, window=window, inner_steps=2)
    reveal = {
        "event": "step",
        "window": 1,
        "action": "reveal",
        "phase": "reveal",
        "offset": 12,
        "last_offset": 23,
        "seconds": 1.0,
    }
    need = pace.need("miner1", "miner", reveal)
    assert need is not None and need.block_s == pytest.approx(1.5 * 1.0 / (15 - 12))


def test_a_miner_needs_all_its_steps_not_the_ones_it_had_time_for() -> None:
    train = {"window": 2, "steps": 5, "steps_assigned": 20, "seconds": 2.5, "sync_seconds": 1.0}
    need = miner_need("miner1", train, {"upload_seconds": 1.5}, upload_deadline=10, headroom=1.5)
    assert need is not None
    assert need.block_s == pytest.approx(1.5 * (1.0 + 20 * 0.5 + 1.5) / 9)
    skipped = skipped_need("miner1", {"window": 3, "step_seconds": 0.5}, 20, 10, 1.5)
    assert skipped is not None and skipped.block_s == pytest.approx(1.5 * 10 / 9)


def test_blocks_stretch_at_once_and_shorten_slowly_within_bounds() -> None:
    assert next_block_time(0.5, 0.5, 2.0, False, 8.0) == 2.0  # at once
    assert next_block_time(0.5, 0.5, 9.0, False, 8.0) == 4.0  # capped at 8x the base
    assert next_block_time(2.0, 0.5, 0.1, False, 8.0) == 2.0  # not inside a window
    assert next_block_time(2.0, 0.5, 0.1, True, 8.0) == pytest.approx(1.7)  # 15 % a window
    assert next_block_time(0.55, 0.5, 0.1, True, 8.0) == 0.5  # never below the base


def test_one_stalled_step_does_not_stretch_the_run_but_a_lasting_load_does() -> None:
    def needs(*block_s: float) -> deque[Need]:
        return deque(Need("v score", w, b, "") for w, b in enumerate(block_s))

    assert typical(needs(2.0)).block_s == 2.0  # the first window counts at once
    assert typical(needs(0.1, 2.0)).block_s == 0.1
    assert typical(needs(0.1, 2.0, 0.1)).block_s == 0.1  # a stall among quick windows
    assert typical(needs(0.1, 2.0, 2.0)).block_s == 2.0  # the load lasts


def _write(root: Path, folder: str, *records: dict) -> None:
    path = root / "state" / folder / "metrics.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        for record in records:
            f.write(json.dumps(record) + "\n")


@pytest.fixture
def simnet(tmp_path: Path):
    server = SimnetServer(tmp_path / "chain.db", port=0, block_time=0.5)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.close()


def test_the_pacemaker_sets_simnet_s_block_time_and_says_whose_work_needed_it(
    tmp_path: Path, simnet: SimnetServer
) -> None:
    url = f"http://127.0.0.1:{simnet.server_address[1]}"
    pace = Pacemaker(
        tmp_path,
        url,
        base_block_s=0.5,
        window=WINDOW,
        inner_steps=20,
        names={"5Fvalidatorhotkey": "validator1"},
    )
    assert pace.poll() == 0.5 and simnet.chain.block_time == 0.5  # nothing measured yet
    step = {
        "event": "step",
        "window": 0,
        "action": "score",
        "phase": "score",
        "offset": 10,
        "last_offset": 15,
        "seconds": 4.0,
    }
    _write(tmp_path, "validator-5Fvalida", step)
    _write(
        tmp_path,
        "miner-5Fminerhot",
        {
            **step,
            "action": "train",
            "phase": "upload",
            "offset": 0,
            "last_offset": 9,
            "seconds": 60.0,
        },
    )
    assert pace.poll() == pytest.approx(1.5 * 4.0 / 5)  # the miner's paced training is no need
    assert simnet.chain.block_time == pytest.approx(1.2)
    record = json.loads((tmp_path / "pacemaker.jsonl").read_text().splitlines()[-1])
    assert record["source"] == "validator1 score" and record["block_s"] == pytest.approx(1.2)
    # A load that lasts keeps the blocks long; once the work is quick for two windows of its
    # last three, blocks shorten by 15 % a window, not at once.
    shown = []
    for window, seconds in ((1, 4.0), (2, 0.1), (3, 0.1), (4, 0.1)):
        _write(tmp_path, "validator-5Fvalida", {**step, "window": window, "seconds": seconds})
        shown.append(pace.poll())
    assert shown == pytest.approx([1.2, 1.2, 1.2 * 0.85, 1.2 * 0.85**2])
    simnet.chain.block_time = 0.5  # as after a chain restart: set again at the next poll
    pace.poll()
    assert simnet.chain.block_time == pytest.approx(pace.block_s)


def test_a_half_written_line_waits_for_the_next_poll(tmp_path: Path, simnet: SimnetServer) -> None:
    url = f"http://127.0.0.1:{simnet.server_address[1]}"
    pace = Pacemaker(tmp_path, url, base_block_s=0.5, window=WINDOW, inner_steps=20)
    path = tmp_path / "state" / "holder-5Fholder" / "metrics.jsonl"
    path.parent.mkdir(parents=True)
    line = json.dumps(
        {
            "event": "step",
            "window": 0,
            "action": "merge",
            "phase": "merge",
            "offset": 16,
            "last_offset": 19,
            "seconds": 3.0,
        }
    )
    path.write_text(line[:20])
    assert pace.poll() == 0.5
    path.write_text(line + "\n")
    assert pace.poll() == pytest.approx(1.5 * 3.0 / 3)


def test_wait_windows_counts_the_chain_s_blocks_not_seconds() -> None:
    head = iter(range(100, 1000))
    polls = []

    def done() -> bool:
        polls.append(1)
        return len(polls) > 5

    wait_windows(done, lambda: next(head), windows=1, blocks_per_window=20, what="x", poll_s=0)
    with pytest.raises(TimeoutError, match="2 windows for a merge"):
        wait_windows(lambda: False, lambda: next(head), 2, 20, "a merge", poll_s=0)
    broken = RuntimeError("neurons exited")

    def check() -> None:
        raise broken

    with pytest.raises(RuntimeError, match="neurons exited"):
        wait_windows(lambda: False, lambda: next(head), 2, 20, "a merge", check, poll_s=0)
