"""``bench.py audit`` at a small size: an honest replay on one machine gives the upload to the
bit, and the lies the adversarial benchmark sends are outside the tolerance."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from benchmarks import audit  # noqa: E402


def test_honest_replays_match_and_lies_do_not(iambic_1024) -> None:
    parser = argparse.ArgumentParser()
    audit.add_arguments(parser)
    args = parser.parse_args(["--windows", "2", "--steps", "4", "--noise", "0,1e-2",
                              "--data", str(iambic_1024 / "iambic-v1024")])  # fmt: skip
    record = audit.run(args)
    same = record["honest"]["0"]
    assert same["all_pass"] and set(same["max_error"].values()) == {0.0}, same
    noisy = record["honest"]["1e-2"]["max_error"]
    assert noisy["update"] > 0.0, noisy  # the noise reaches the update: the check can fail
    liars = record["liars"]
    for kind in ("inflater", "lazy_trainer", "orthogonal_poisoner", "state_poisoner"):
        assert liars[kind]["caught"], (kind, liars[kind])
    assert liars["inflater"]["min_error"] == 2.0  # 3 x the update, measured against 1 x
    assert record["replay_seconds"] > 0
