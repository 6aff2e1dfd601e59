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
