"""The monitor tests' fixture run: 1 holder, 2 validators, 3 miners, 4 merged rounds.

Known answers (worked out by hand from the files under fixtures/run):

- versions 0..4 with held-out loss 10.84, 9.12, 7.85, 6.93, 6.41; version 0 at t0+4, 4 at t0+140;
- tokens merged 38,400 + 3 x 30,720 = 130,560, over 136 s = 960 tokens/s;
- bytes fetched 400,000 against 2,448,000,000 for DDP: 6,120x less;
- miner1/2/3 train at 2,000 / 2,500 / 1,000 tokens/s; miner3 trains windows 0 and 1 only (late
  in window 1, so merged once) and is idle; miners 1 and 2 also trained window 4 (not merged yet);
- validator2 failed window 2 (StorageError).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

FIXTURE_RUN = Path(__file__).parent / "fixtures" / "run"


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """A writable copy of the fixture run (tests may add or damage files)."""
    return Path(shutil.copytree(FIXTURE_RUN, tmp_path / "run"))
