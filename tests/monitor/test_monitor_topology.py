"""The run page's topology panel, from the records a two-model room run leaves: each member's
``plan`` record, its train / grant / version records and a failed window."""

from __future__ import annotations

import json
import re
from pathlib import Path

from subnet.monitor.report import load_run, render_page, summary
from subnet.monitor.report.topology import load_topology

A, B, W1, W2 = "5" + "A" * 47, "5" + "B" * 47, "5" + "C" * 47, "5" + "D" * 47
LANES = {
    "grants": {"kind": "data-grant", "mode": "directed", "writers": ["holder_a"],
               "readers": ["worker"]},
    "grads_a": {"kind": "gradient", "mode": "directed", "writers": ["worker"],
                "readers": ["holder_a"]},
    "model_b": {"kind": "model-manifest", "mode": "broadcast", "writers": ["holder_b"],
                "readers": ["worker"]},
}  # fmt: skip
SLOTS = {A: ("holder_a", "holder"), B: ("holder_b", "holder"), W1: ("worker", "miner"),
         W2: ("worker", "miner")}  # fmt: skip


def _write(root: Path, hotkey: str, records: list[dict]) -> None:
    slot, role = SLOTS[hotkey]
    folder = root / "state" / f"{slot}-{hotkey[1]}"
    folder.mkdir(parents=True)
    plan = {"event": "plan", "ref": "@beam/two-models@1.0.0", "digest": "ab" * 8, "slot": slot,
            "lanes": LANES, "steps": []}  # fmt: skip
    lines = [{"t": 1.0, "hotkey": hotkey, "role": role, **r} for r in [plan, *records]]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))


def _two_model_run(root: Path) -> Path:
    _write(root, A, [{"event": "grant", "window": 1, "units": {}},
                     {"event": "version", "window": 1, "version": 1, "lane": "model_a",
                      "contributors": {W1: 0.5, W2: 0.5}}])  # fmt: skip
    _write(root, B, [{"event": "version", "window": 0, "version": 1, "lane": "model_b",
                      "contributors": {W1: 1.0}},
                     {"event": "window_failed", "window": 1, "step": "merge", "reason": "x"}])  # fmt: skip
    for hotkey in (W1, W2):
        trains = [{"event": "train", "window": w, "model": m} for w in (0, 1)
                  for m in ("model_a", "model_b") if (w, m) != (0, "model_a")]  # fmt: skip
        _write(root, hotkey, trains if hotkey == W1 else trains[1:])
    (root / "run.json").write_text(
        json.dumps(
            {
                "name": "t",
                "participants": {
                    A: {"name": "lead", "role": "holder"},
                    W1: {"name": "w1", "role": "miner"},
                },
            }
        )
    )
    return root


def test_the_topology_its_lanes_and_each_slots_rounds(tmp_path: Path) -> None:
    view = load_topology(_two_model_run(tmp_path), {A: "lead", W1: "w1"})
    assert view is not None and view.ref == "@beam/two-models@1.0.0"
    assert view.slots == {"holder_a": ["lead"], "holder_b": [B[:8]], "worker": [W2[:8], "w1"]}
    grants = next(lane for lane in view.lanes if lane.name == "grants")
    assert (grants.writer_members, grants.reader_members) == (("lead",), (W2[:8], "w1"))
    rounds = {(r.window, r.slot): r for r in view.rounds}
    assert rounds[(0, "worker")].sent == ("w1",)  # W2 trained nothing in round 0
    assert rounds[(0, "worker")].merged == ("w1",)  # model B merged w1 alone
    assert rounds[(1, "worker")].sent == (W2[:8], "w1")
    assert rounds[(1, "worker")].merged == (W2[:8], "w1")  # model A merged both
    assert rounds[(0, "holder_a")].sent == ("lead",)  # the grant for round 1, sent in round 0
    assert rounds[(1, "holder_a")].merged == ("lead",)
    assert rounds[(0, "holder_b")].merged == (B[:8],)
    assert rounds[(1, "holder_b")].failed == (B[:8],) and not rounds[(1, "holder_b")].merged


def test_the_page_shows_the_topology_panel(tmp_path: Path) -> None:
    page = render_page(load_run(_two_model_run(tmp_path)))
    text = re.sub(r"<[^>]+>", " ", page)
    assert "Topology  @beam/two-models@1.0.0" in text
    assert "Rounds by slot" in text and "grads_a" in text and "holder_a: lead" in text


def test_a_run_without_plan_records_has_no_topology_panel(tmp_path: Path) -> None:
    (tmp_path / "state" / "m").mkdir(parents=True)
    (tmp_path / "state" / "m" / "metrics.jsonl").write_text('{"event": "train", "window": 0}\n')
    assert load_topology(tmp_path) is None
    assert "Rounds by slot" not in render_page(load_run(tmp_path))


def test_member_names_come_from_a_topology_rooms_run_json(tmp_path: Path) -> None:
    root = _two_model_run(tmp_path)
    (root / "run.json").write_text(json.dumps({"members": {"holder": [A, "holder_a"],
                                                           "holder_b0": [B, "holder_b"]}}))  # fmt: skip
    view = load_topology(root)
    assert view.slots["holder_a"] == ["holder"] and view.slots["holder_b"] == ["holder_b0"]


def test_each_model_line_keeps_its_own_versions(tmp_path: Path) -> None:
    # Both holders publish a version 1; neither replaces the other's, and each line's merges
    # are shown apart (model_a's is the main line: no lane is called ``model``)
    run = load_run(_two_model_run(tmp_path))
    assert list(run.lines) == ["model_a", "model_b"]
    assert [(v.window, v.hotkey) for v in run.versions] == [(1, A)]
    rows = {r.lane: r for r in summary.line_rows(run)}
    assert (rows["model_a"].windows, rows["model_b"].windows) == ((1,), (0,))
    assert rows["model_b"].holders == (B,)
    assert summary.trainers_merged(run) == (2, 2)  # round 1: model A merged w1 and W2
    page = render_page(run)
    assert "Merges per model line" in page
    assert "model_a&#x27;s held-out loss per outer round" in page  # the chart's line, named
