"""``bench.py rescore``: a run's logged measurements, scored again, give back its logged scores,
and other settings change exactly the scores they should.

The logs here are written the way ``Validator.step`` and ``Validator.sync`` write them (the same
library calls in the same order); ``tests/adversary/test_adversary_short.py`` replays the logs of
real validators too.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field, replace
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


@dataclass
class Window:
    """One window of a validator: its evaluations, the verdicts decided before scoring, and the
    bans its sync logged first."""

    evaluations: list[Evaluation]
    miners: set[str]
    missing: set[str] = field(default_factory=set)
    copies: dict[str, str] = field(default_factory=dict)
    banned: list[str] = field(default_factory=list)


# Three honest uploads proven at 3 - 5 standard errors, one at 1.5 (paid only below proof_z 1.5);
# one gain on random samples for all, so no harm or record factor enters the known answers.
SPECIFIC = {"h1": (0.004, 0.003), "h2": (0.005, 0.004), "h3": (0.003, 0.005),
            "weak": (0.0015, 0.0015)}  # fmt: skip
MINERS = {*SPECIFIC, "late1"}
SIMPLE = [Window([_ev(hk, 0.010, s[w]) for hk, s in SPECIFIC.items()], MINERS) for w in range(2)]
GROUPS = {"honest": ["h1", "h2", "h3"], "weak": ["weak"], "gone": ["late1"]}


def _write_run(root: Path, windows: list[Window], groups: dict | None = None) -> Path:
    """A run folder as the benchmark leaves it, its validator's metrics logged as a validator
    logs them (``Validator.sync``'s bans, then ``Validator.step``)."""
    cfg = ScoringConfig()
    records: dict[str, list[float]] = {}
    moving: dict[str, float] = {}
    counts: dict[str, int] = {}  # windows evaluated and paid (``ScoreBook.evaluated``)
    lines: list[dict] = []
    for w, win in enumerate(windows):
        for hk in win.banned:
            moving.pop(hk, None)
            records.pop(hk, None)
            counts.pop(hk, None)
            lines.append({"event": "equivocation", "window": w - 1, "hotkey": hk, "version": w})
        records = extend_records(records, gain_ratios(win.evaluations, cfg, win.copies),
                                 cfg.record_windows, win.miners)  # fmt: skip
        verdicts = score_window(win.evaluations, win.missing, {"late1"} & win.miners, (), {},
                                win.copies, cfg, records)  # fmt: skip
        paid = {k for k, v in verdicts.items() if v.reason == "scored"}
        counts = {hk: counts.get(hk, 0) + (hk in paid) for hk in win.miners}
        scores = {k: v.score for k, v in verdicts.items()}
        moving = update_moving(moving, scores, win.miners, cfg, counts=counts)
        lines.append({"event": "scores", "window": w, "moving": dict(moving),
                      "details": {k: v.detail for k, v in verdicts.items() if v.detail},
                      "verdicts": {k: [v.reason, v.score] for k, v in verdicts.items()},
                      "measured": {ev.hotkey: ev.measures() for ev in win.evaluations}})  # fmt: skip
    state = root / "state" / "validator-5Fake"
    state.mkdir(parents=True)
    (state / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (root / "protocol.toml").write_text('[protocol]\nmodel = "tiny"\n')
    (root / "groups.json").write_text(json.dumps(groups or GROUPS))
    return root


def _h1_banned_then_silent() -> list[Window]:
    """Windows 2 and 3: h1 banned before window 2 and missing from then on."""
    return [Window([_ev(hk, 0.010, 0.004) for hk in ("h2", "h3")], MINERS,
                   missing={"h1", "weak"}, banned=["h1"] if w == 2 else [])
            for w in (2, 3)]  # fmt: skip


def _run(root: Path, *settings: str) -> dict:
    return rescore.run(argparse.Namespace(root=root, set=list(settings)))


def _one(out: dict) -> dict:
    (v,) = out["validators"]
    return v


def _all_reproduced(v: dict) -> bool:
    return all(
        same == n and n != "0" for same, n in (x.split("/") for x in v["reproduced"].values())
    )


def test_a_measured_record_stands_for_its_evaluation() -> None:
    for ev in [*SIMPLE[0].evaluations, replace(SIMPLE[0].evaluations[0], fraction=0.5),
               replace(SIMPLE[0].evaluations[1], loss_before_heldout=2.0,
                       loss_after_heldout=1.99)]:  # fmt: skip
        back = rescore.evaluation(ev.hotkey, ev.measures())
        assert back is not None and back.fraction == ev.fraction
        if ev.heldout_gain() is None:
            assert back.heldout_gain() is None
        else:
            assert back.heldout_gain() == pytest.approx(ev.heldout_gain(), abs=1e-7)
        for proof_z in (0.0, 2.0):
            cfg = ScoringConfig(proof_z=proof_z)
            assert window_score(back, cfg, 0.01, 0.004) == pytest.approx(
                window_score(ev, cfg, 0.01, 0.004), rel=1e-4)  # fmt: skip


def test_the_replay_reproduces_the_logged_scores(tmp_path: Path) -> None:
    out = _run(_write_run(tmp_path, SIMPLE))
    v = _one(out)
    assert v["reproduced"] == {"scores": "8/8", "moving": "10/10"}
    assert v["settings_as_run"] is False  # a hand-written log carries no config_hash
    assert v["shares"] == v["logged_shares"]
    assert v["shares"]["weak"] == 0.0 and v["shares"]["honest"] == pytest.approx(1.0)
    assert out["settings"] == {}


def test_the_track_record_copies_partial_uploads_and_leavers_are_replayed(tmp_path: Path) -> None:
    # "low" helps random data at 0.8 x the others every window: its record, not one window,
    # costs it credit. "copy" is a judged copy of h1 with the best gain of all (kept out of the
    # median). "part" trained half the steps. "h3" leaves after the second window.
    def window(w: int) -> Window:
        evs = [_ev("h1", 0.010, 0.004), _ev("h2", 0.011, 0.005), _ev("h3", 0.009, 0.004),
               _ev("low", 0.0082, 0.005), _ev("copy", 0.02, 0.004),
               replace(_ev("part", 0.009, 0.004), fraction=0.5)]  # fmt: skip
        miners = {"h1", "h2", "h3", "low", "copy", "part"} - ({"h3"} if w >= 2 else set())
        return Window([e for e in evs if e.hotkey in miners], miners, copies={"copy": "h1"})

    windows = [window(w) for w in range(4)]
    root = _write_run(tmp_path, windows, {"honest": ["h1", "h2", "h3"], "low": ["low"],
                                          "copy": ["copy"], "part": ["part"]})  # fmt: skip
    v = _one(_run(root))
    assert _all_reproduced(v), v["reproduced"]
    assert v["shares"]["copy"] == 0.0 and 0.0 < v["shares"]["part"] < v["shares"]["honest"] / 3
    # Without the record "low" would be paid more: the replay must have used it.
    no_record = _one(_run(root, "record_windows=0"))
    assert no_record["shares"]["low"] > v["shares"]["low"]


def test_a_lower_proof_bar_pays_the_weak_upload_what_it_proved(tmp_path: Path) -> None:
    out = _run(_write_run(tmp_path, SIMPLE), "proof_z=0")
    v = _one(out)
    assert out["settings"] == {"proof_z": 0.0}
    assert v["shares"]["weak"] > 0.0 and v["logged_shares"]["weak"] == 0.0
    # At proof_z 0 each upload is paid its whole excess; moving = 0.7 * 0.3 * s0 + 0.3 * s1.
    total = sum(0.7 * 0.3 * s0 + 0.3 * s1 for s0, s1 in SPECIFIC.values())
    assert v["shares"]["weak"] == pytest.approx((0.3 * 0.7 + 0.3) * 0.0015 / total, abs=1e-4)


def test_an_equivocator_s_ban_drops_its_moving_score_even_when_it_stops_uploading(
    tmp_path: Path,
) -> None:
    # Banned in the sync before window 2, and missing from then on: the validator dropped its
    # moving score at the ban, so nothing is left to decay.
    after = _h1_banned_then_silent()
    root = _write_run(tmp_path, [*SIMPLE, *after])
    v = _one(_run(root))
    assert _all_reproduced(v), v["reproduced"]
    events = rescore._events(root / "state/validator-5Fake/metrics.jsonl")
    moving, _ = rescore.replay(events, ScoringConfig())
    assert moving["h1"] == 0.0 and moving["h2"] > 0.0
    without_ban = [e for e in events if e["event"] != "equivocation"]
    assert rescore.replay(without_ban, ScoringConfig())[0]["h1"] > 0.0


def test_a_window_logged_twice_counts_once_as_last_logged(tmp_path: Path) -> None:
    root = _write_run(tmp_path, SIMPLE)
    path = root / "state/validator-5Fake/metrics.jsonl"
    lines = path.read_text().splitlines()
    stale = json.loads(lines[1])  # window 1 scored once before a crash, with other figures
    stale["measured"]["weak"]["specific"] = 0.05
    path.write_text("\n".join([lines[0], json.dumps(stale), lines[1]]) + "\n")
    assert _all_reproduced(_one(_run(root)))


@pytest.mark.parametrize(
    ("setting", "says"),
    [("nonsense=1", "KEY one of"), ("proof_z", "KEY=VALUE"), ("scoring.proof_z=-1", "proof_z"),
     ("copy_z=2", "a replay cannot change it"), ("record_floor=0.99", "record_floor")],
)  # fmt: skip
def test_a_bad_setting_is_one_error_line(tmp_path: Path, setting: str, says: str) -> None:
    root = _write_run(tmp_path, SIMPLE)
    with pytest.raises(SystemExit) as caught:
        _run(root, setting)
    message = str(caught.value)
    assert message.startswith("error: --set") and says in message and "\n" not in message


def _spoil(root: Path, what: str) -> None:
    metrics = root / "state/validator-5Fake/metrics.jsonl"
    if what == "truncated line":
        metrics.write_text(metrics.read_text()[:-40])
    elif what == "not an object":
        metrics.write_text("[1, 2]\n")
    elif what == "old log":
        metrics.write_text(json.dumps({"event": "scores", "window": 0, "verdicts": {}}) + "\n")
    elif what == "groups not json":
        (root / "groups.json").write_text("{honest")
    elif what == "groups of another run":
        (root / "groups.json").write_text(json.dumps({"honest": ["5Other"]}))
    elif what == "bad protocol":
        (root / "protocol.toml").write_text('[protocol]\nmodle = "tiny"\n')
    elif what == "no scored window":
        metrics.write_text(json.dumps({"event": "weights", "ok": False}) + "\n")


@pytest.mark.parametrize("what", ["truncated line", "not an object", "old log", "groups not json",
                                  "groups of another run", "bad protocol", "no scored window"])  # fmt: skip
def test_a_spoiled_run_folder_is_one_error_line(tmp_path: Path, what: str) -> None:
    root = _write_run(tmp_path, SIMPLE)
    _spoil(root, what)
    with pytest.raises(SystemExit) as caught:
        _run(root)
    message = str(caught.value)
    assert message.startswith("error: ") and "\n" not in message


def test_a_folder_that_is_not_a_run_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="^error: .* is not a finished run"):
        _run(tmp_path)


def test_a_failed_check_is_a_ban_in_the_replay_and_an_inconclusive_one_is_not(
    tmp_path: Path,
) -> None:
    after = _h1_banned_then_silent()
    root = _write_run(tmp_path, [*SIMPLE, *after])
    events = rescore._events(root / "state/validator-5Fake/metrics.jsonl")
    as_check = [{"event": "check", "window": e["window"], "hotkey": e["hotkey"], "ok": False}
                if e["event"] == "equivocation" else e for e in events]  # fmt: skip
    assert rescore.replay(as_check, ScoringConfig())[0]["h1"] == 0.0
    inconclusive = [dict(e, ok=None) if e["event"] == "check" else e for e in as_check]
    assert rescore.replay(inconclusive, ScoringConfig())[0]["h1"] > 0.0
