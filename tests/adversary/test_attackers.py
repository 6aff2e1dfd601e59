"""The attacker entry script's own command line, and the benchmark's list of kinds."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from benchmarks import adversarial, attackers  # noqa: E402


def test_attack_flag_is_taken_off_the_miner_flags() -> None:
    argv = ["attackers.py", "--netuid", "3", "--attack", "copier:5A,5B", "--wallet.name", "m"]
    assert attackers._take_attack(argv) == ("copier", ("5A", "5B"))
    assert argv == ["attackers.py", "--netuid", "3", "--wallet.name", "m"]
    assert attackers._take_attack(["x", "--attack", "free_rider"]) == ("free_rider", ())


def test_unknown_attack_is_one_error_line() -> None:
    with pytest.raises(SystemExit, match="error: unknown attack 'nope'"):
        attackers._take_attack(["x", "--attack", "nope"])


def test_the_benchmark_runs_every_attack_there_is() -> None:
    assert set(adversarial.ALL_ATTACKS) == set(attackers.ATTACKS)
    assert set(adversarial.COPIES) <= set(attackers.ATTACKS)


def test_targets_are_one_percent_or_for_honest_work_the_best_honest_miner() -> None:
    def group(validators, incentive, merge):
        return {"validator_weight_share": validators, "incentive": incentive,
                "merge_weight_share_reported": merge}  # fmt: skip

    honest = {**group([0.9, 0.95], 0.96, 0.97),
              "best_single": group([0.3, 0.2], 0.25, 0.2)}  # fmt: skip
    record = {"attacks": ["copier", "inflater", "lazy_trainer"], "loss_over_clean": 1.01,
              "attacked": {"groups": {"honest": honest, "copier": group([0.0, 0.005], 0.0, 0.0),
                                      "inflater": group([0.3, 0.19], 0.2, 0.21),
                                      "lazy_trainer": group([0.02, 0.0], 0.0, None)}}}  # fmt: skip
    assert adversarial.targets(record) == {
        "copier_le_1pct": True, "inflater_le_best_honest": False,  # its merge share: 0.21 > 0.2
        "lazy_trainer_le_1pct": False, "no_honest_miner_banned": True,
        "honest_keep_ge_95pct": True, "loss_within_2pct_of_clean": True,
    }  # fmt: skip
    record["attacked"]["groups"]["inflater"]["merge_weight_share_reported"] = 0.2
    assert adversarial.targets(record)["inflater_le_best_honest"] is True
    # The honest work keeps 95 %, the inflater's honest-work pay counted in with the honest.
    groups = record["attacked"]["groups"]
    groups["honest"] |= group([0.7, 0.8], 0.79, 0.78)
    groups["inflater"] |= group([0.1, 0.1], 0.1, 0.1)
    assert adversarial.targets(record)["honest_keep_ge_95pct"] is False  # 0.8 of validator 1
    groups["inflater"] |= group([0.25, 0.16], 0.17, 0.2)
    assert adversarial.targets(record)["honest_keep_ge_95pct"] is True


def test_a_switcher_is_held_to_one_percent_and_never_merged_and_nobody_honest_is_banned() -> None:
    def group(validators, incentive, merge, banned_by=0):
        return {"validator_weight_share": validators, "incentive": incentive,
                "merge_weight_share_reported": merge, "banned_by": banned_by}  # fmt: skip

    groups = {
        "honest": group([0.99, 0.99], 0.99, 0.99),
        "switcher": group([0.0, 0.0], 0.0, 0.02, 2),
    }
    record = {"attacks": ["switcher"], "attacked": {"groups": groups}}
    assert adversarial.targets(record) == {
        "switcher_not_merged": False, "switcher_le_1pct": False,  # merged at 0.02
        "no_honest_miner_banned": True, "honest_keep_ge_95pct": True,
    }  # fmt: skip
    groups["switcher"]["merge_weight_share_reported"] = 0.0
    groups["honest"]["banned_by"] = 1
    targets = adversarial.targets(record)
    assert targets["switcher_not_merged"] and targets["switcher_le_1pct"]
    assert targets["no_honest_miner_banned"] is False
