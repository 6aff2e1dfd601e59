"""The pay section: each miner's latest scored window, explained by the parts its validators
logged with the score (known answers from a hand-written run)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from subnet.monitor.report import load_run, render_page
from subnet.monitor.report.pay_panel import pay_rows


def _write(path: Path, records: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def _run(tmp_path: Path) -> Path:
    parts = {
        "a": {"assigned": 0.02, "random": 0.015, "specific": 0.004, "se": 0.001, "fraction": 1.0},
        "b": {"assigned": 0.03, "random": 0.02, "specific": 0.001, "se": 0.001, "fraction": 0.5},
    }
    for v, scores in (("v1", {"a": 0.0018, "b": 0.0}), ("v2", {"a": 0.0022, "b": 0.0})):
        _write(
            tmp_path / "state" / f"validator-{v}" / "metrics.jsonl",
            [
                {
                    "event": "scores",
                    "role": "validator",
                    "hotkey": v,
                    "t": 5,
                    "window": 3,
                    "verdicts": {hk: ["scored", s] for hk, s in scores.items()},
                    "moving": {"a": 0.001, "b": 0.0002},
                    "measured": parts,
                    "details": {"b": "partial 0.50"},
                },
            ],
        )
    _write(
        tmp_path / "state" / "holder-h" / "metrics.jsonl",
        [
            {
                "event": "version",
                "role": "holder",
                "hotkey": "h",
                "t": 1,
                "window": -1,
                "version": 0,
            },
            {
                "event": "version",
                "role": "holder",
                "hotkey": "h",
                "t": 9,
                "window": 3,
                "version": 1,
                "contributors": {"a": 1.0},
            },
        ],
    )
    return tmp_path


def test_each_miner_is_explained_by_its_score_parts(tmp_path: Path) -> None:
    rows = {r.name: r for r in pay_rows(load_run(_run(tmp_path)))}
    a, b = rows["a"], rows["b"]
    assert a.window == 3 and a.verdict == "scored"
    assert a.score == pytest.approx(0.002)  # the median of the two validators' scores
    assert a.proven == pytest.approx(0.004 - 2 * 0.001)  # excess less 2 standard errors
    assert (a.assigned, a.random, a.fraction, a.share) == (0.02, 0.015, 1.0, 1.0)
    assert b.verdict == "scored (partial 0.50)" and b.proven == 0.0 and b.share == 0.0
    text = re.sub(r"<[^>]+>", " ", render_page(load_run(tmp_path), now=10))
    assert "Why each miner earned what it did" in text and "0.0040 &plusmn; 0.0010" in text
