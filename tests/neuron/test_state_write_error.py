"""A disk that refuses the neuron's state stops it with one line that says where and what to do."""

from __future__ import annotations

import pytest
import torch

from subnet.neuron.state import StateFile, StateWriteError


def test_a_state_folder_that_cannot_be_written_is_one_clear_error(tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")  # the state folder would have to live inside a file
    state = StateFile(blocker / "miner-5F")
    with pytest.raises(StateWriteError) as refused:
        state.save({"last_window": 3}, {"w": torch.zeros(2)})
    line = str(refused.value)
    assert "\n" not in line and str(blocker / "miner-5F") in line
    assert "--neuron.state_dir" in line and "resumes from the last state saved" in line
