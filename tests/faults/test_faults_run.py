"""The whole subnet under faults (`scripts/bench.py faults`), as a test: the short variant.

simnet, moto and 5 neurons as OS processes; S3 through a fault-injecting proxy; kill -9 of a
miner, a validator and the holder inside their phases, then a chain restart. The long variant
(two kill rounds, more merges) runs with `BEAM_FAULTS_LONG=1` or `scripts/bench.py faults --long`.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from benchmarks.fault_proxy import FaultRates  # noqa: E402
from benchmarks.faults import scenario  # noqa: E402

LONG = os.environ.get("BEAM_FAULTS_LONG") == "1"


@pytest.mark.slow
def test_the_subnet_survives_s3_faults_kills_and_a_chain_restart(
    tmp_path: Path, iambic_1024: Path
) -> None:
    (tmp_path / "data").symlink_to(iambic_1024)  # the run's data folder, prepared once per run
    record = scenario(tmp_path, FaultRates(error=0.05, reset=0.03, stall=0.02, stall_s=3.0),
                      long=LONG, merges_after=4 if LONG else 2)  # fmt: skip
    summary = json.dumps({k: v for k, v in record.items() if k != "windows"}, indent=1)
    assert record["checks"] == {
        "no_window_merged_twice": True,
        "run_continued": True,
        "no_accepted_upload_lost": True,
        "every_neuron_on_the_holders_digest": True,
    }, summary
    assert record["proxy"].get("error", 0) + record["proxy"].get("reset", 0) > 0, summary
    assert all(code == 0 for code in record["exit_codes"].values()), summary
