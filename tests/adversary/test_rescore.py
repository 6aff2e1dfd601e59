"""``bench.py rescore``: a run's logged measurements, scored again, give back its logged scores,
and other settings change exactly the scores they should."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from benchmarks import rescore  # noqa: E402

from subnet.scoring.config import ScoringConfig  # noqa: E402
from subnet.scoring.evidence import Specificity  # noqa: E402
from subnet.scoring.record import extend_records  # noqa: E402
from subnet.scoring.weights import update_moving  # noqa: E402
from subnet.scoring.window import Evaluation, gain_ratios, score_window, window_score  # noqa: E402


def _ev(hotkey: str, random_gain: float, spec: float, se: float = 0.001) -> Evaluation:
    """An upload measured at losses 2.0 before (not 1: the replay must keep relative gains)."""
    return Evaluation(hotkey, 2.0, 2.0 * (1 - random_gain - spec), 2.0, 2.0 * (1 - random_gain),
                      Specificity(spec, se))  # fmt: skip


# Three honest uploads proven at 3 - 5 standard errors, one at 1.5 (paid only below proof_z 1.5);
# one gain on random samples for all, so no harm or record factor enters the known answers.
SPECIFIC = {"h1": (0.004, 0.003), "h2": (0.005, 0.004), "h3": (0.003, 0.005),
            "weak": (0.0015, 0.0015)}  # fmt: skip
WINDOWS = [[_ev(hk, 0.010, spec[w]) for hk, spec in SPECIFIC.items()] for w in range(2)]
GROUPS = {"honest": ["h1", "h2", "h3"], "weak": ["weak"], "gone": ["late1"]}


def _write_run(root: Path, windows: list[list[Evaluation]], extra: dict | None = None) -> Path:
    """A run folder as the benchmark leaves it, its metrics written the way a validator's are."""
    cfg = ScoringConfig()
    records: dict[str, list[float]] = {}
    moving: dict[str, float] = {}
    lines = []
    for w, evaluations in enumerate(windows):
        miners = {ev.hotkey for ev in evaluations} | {"late1"}
        records = extend_records(records, gain_ratios(evaluations, cfg), cfg.record_windows, miners)
        verdicts = score_window(evaluations, (), {"late1"}, (), {}, {}, cfg, records)
        moving = update_moving(moving, {k: v.score for k, v in verdicts.items()}, miners, cfg)
        lines.append({"event": "scores", "window": w, "moving": moving, "details": {},
                      "verdicts": {k: [v.reason, v.score] for k, v in verdicts.items()},
                      "measured": {ev.hotkey: ev.measures() for ev in evaluations}})  # fmt: skip
    lines += [extra] if extra else []
    state = root / "state" / "validator-5Fake"
    state.mkdir(parents=True)
    (state / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (root / "protocol.toml").write_text('[protocol]\nmodel = "tiny"\n')
    (root / "groups.json").write_text(json.dumps(GROUPS))
    return root


def _run(root: Path, *settings: str) -> dict:
    return rescore.run(argparse.Namespace(root=root, set=list(settings)))


def test_a_measured_record_stands_for_its_evaluation() -> None:
    for ev in WINDOWS[0]:
        back = rescore.evaluation(ev.hotkey, ev.measures())
        assert back is not None
        for proof_z in (0.0, 2.0):
            cfg = ScoringConfig(proof_z=proof_z)
            assert window_score(back, cfg, 0.01) == pytest.approx(window_score(ev, cfg, 0.01),
                                                                  rel=1e-4)  # fmt: skip


def test_the_replay_reproduces_the_logged_scores(tmp_path: Path) -> None:
    out = _run(_write_run(tmp_path, WINDOWS))
    (v,) = out["validators"]
    assert v["reproduced"] == "8/8"
    assert v["shares"] == v["logged_shares"]
    assert v["shares"]["weak"] == 0.0 and v["shares"]["honest"] == pytest.approx(1.0)
    assert out["settings"] == {}


def test_a_lower_proof_bar_pays_the_weak_upload_what_it_proved(tmp_path: Path) -> None:
    out = _run(_write_run(tmp_path, WINDOWS), "proof_z=0")
    (v,) = out["validators"]
    assert out["settings"] == {"proof_z": 0.0}
    assert v["shares"]["weak"] > 0.0 and v["logged_shares"]["weak"] == 0.0
    # At proof_z 0 each upload is paid its whole excess; moving = 0.7 * 0.3 * s0 + 0.3 * s1.
    total = sum(0.7 * 0.3 * s0 + 0.3 * s1 for s0, s1 in SPECIFIC.values())
    assert v["shares"]["weak"] == pytest.approx((0.3 * 0.7 + 0.3) * 0.0015 / total, abs=1e-4)


def test_an_equivocator_s_ban_drops_its_moving_score(tmp_path: Path) -> None:
    banned = {"event": "scores", "window": 2, "moving": {}, "measured": {},
              "details": {"h1": "equivocated"},
              "verdicts": {"h1": ["rejected", 0.0], "h2": ["missing", 0.0],
                           "h3": ["missing", 0.0], "weak": ["missing", 0.0]}}  # fmt: skip
    out = _run(_write_run(tmp_path, WINDOWS, banned))
    (v,) = out["validators"]
    assert v["shares"]["honest"] > 0.0 and v["shares"]["weak"] == 0.0
    moving, _, _ = rescore.replay(
        [json.loads(x) for x in (tmp_path / "state/validator-5Fake/metrics.jsonl").open()],
        ScoringConfig(),
    )
    assert moving["h1"] == 0.0 and moving["h2"] > 0.0  # without the ban: 0.7 x its score


@pytest.mark.parametrize(
    ("setting", "says"),
    [("nonsense=1", "KEY one of"), ("proof_z", "KEY=VALUE"), ("scoring.proof_z=-1", "proof_z")],
)
def test_a_bad_setting_is_one_error_line(tmp_path: Path, setting: str, says: str) -> None:
    root = _write_run(tmp_path, WINDOWS)
    with pytest.raises(SystemExit) as caught:
        _run(root, setting)
    message = str(caught.value)
    assert message.startswith("error: --set") and says in message and "\n" not in message


def test_a_folder_that_is_not_a_run_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="^error: .* is not a finished run"):
        _run(tmp_path)
