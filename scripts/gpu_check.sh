#!/usr/bin/env bash
# The GPU check: one short run (under 5 minutes on one GPU) that writes one JSON line.
#
#   bash scripts/gpu_check.sh [OUT_DIR]        # DEVICE=cuda:1 to pick another GPU
#
# DEVICE=cpu PRESET=tiny TOKENS=512 runs the same steps on a CPU in seconds (what the test does).
#
# 1. Throughput and MFU of hypertrain-20m, fp32 and bf16, at sequence lengths 64 (the protocol's)
#    and 512, 16,384 tokens a step: `bench.py throughput --device cuda` (medians of interleaved
#    bursts after warm-up; MFU against the datasheet peak of the GPUs it knows).
# 2. The verification replay of a GPU-trained window on the CPU: `bench.py gpu_replay` trains two
#    protocol windows of hypertrain-20m on the GPU (fp32, as checks require), replays the second
#    on the CPU and runs the validator's check on beacon-drawn chunks (as `bench.py verify` does
#    across CPU kernel paths): the check's error against the tolerance, pass or fail.
# 3. The GPU's replay class (`bench.py gpu_class`): in fp32 and bf16, two runs of one window with
#    the class's deterministic settings give bit-identical codec inputs, a validator's replay on
#    the same GPU passes its check, the settings' cost in tokens/s, and that a CPU validator's
#    draw never names an upload of the GPU's class. (Step 2 is reported, not required: a CPU
#    replay of a GPU window is another class, and no draw assigns it.)
# Each step's own JSON line is kept in OUT_DIR; the last line printed (and OUT_DIR/gpu_check.json)
# is one JSON object with both. Nothing here needs a chain, storage or a dataset. Exit status is
# non-zero if a step fails or the replay class's checks (step 3) do not pass.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-${OUT:-.beam/gpu_check}}"
DEVICE="${DEVICE:-cuda}"
PRESET="${PRESET:-hypertrain-20m}"
TOKENS="${TOKENS:-16384}"
mkdir -p "$OUT"
PY="${PYTHON:-python}"
STEP_TIMEOUT="${STEP_TIMEOUT:-150}"  # seconds each step may take (a hang guard; the test's CPU is slower)
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

if [[ "$DEVICE" == cuda* ]]; then
    "$PY" -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; print(torch.__version__, torch.cuda.get_device_name(0))" >&2
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >&2 || true
fi

echo "== throughput (--device $DEVICE)" >&2
timeout "$STEP_TIMEOUT" "$PY" scripts/bench.py throughput --json --device "$DEVICE" --presets "$PRESET" \
    --seq-lens 64,512 --precisions fp32,bf16 --tokens "$TOKENS" --reps 9 \
    > "$OUT/throughput.log" 2>&1
tail -n 1 "$OUT/throughput.log" > "$OUT/throughput.json"

echo "== a window trained on $DEVICE, replayed and checked on the CPU" >&2
timeout "$STEP_TIMEOUT" "$PY" scripts/bench.py gpu_replay --json --device "$DEVICE" --preset "$PRESET" \
    --threads "$(nproc)" \
    > "$OUT/gpu_replay.log" 2>&1
tail -n 1 "$OUT/gpu_replay.log" > "$OUT/gpu_replay.json"

echo "== its replay class on $DEVICE: two runs bit for bit, a same-device check, determinism's cost" >&2
timeout "$STEP_TIMEOUT" "$PY" scripts/bench.py gpu_class --json --device "$DEVICE" --preset "$PRESET" \
    --threads "$(nproc)" \
    > "$OUT/gpu_class.log" 2>&1
tail -n 1 "$OUT/gpu_class.log" > "$OUT/gpu_class.json"

"$PY" - "$OUT" <<'PY'
import json
import sys
from pathlib import Path

out = Path(sys.argv[1])
tp = json.loads((out / "throughput.json").read_text())
rp = json.loads((out / "gpu_replay.json").read_text())
gc = json.loads((out / "gpu_class.json").read_text())
cells = {
    f"{c['precision']}@{c['seq_len']}": {k: c.get(k) for k in (
        "beam_tokens_per_s", "beam_tokens_per_s_spread", "tflops", "mfu", "overhead_ratio")}
    for c in tp["cells"] if "skipped" not in c
}
record = {
    "benchmark": "gpu_check",
    "gpu": tp["env"].get("gpu"),
    "throughput": {"preset": tp["cells"][0]["preset"], "tokens_per_step": tp["tokens_per_step"],
                   "cells": cells, "bf16_speedup_over_fp32": tp["bf16_speedup_over_fp32"]},
    "replay": {k: rp[k] for k in ("check_error_max", "check_tolerance", "checks_passed", "checks",
                                  "update_relative_difference", "device_window_s",
                                  "cpu_replay_s", "passed")},
    "replay_class": {k: gc[k] for k in ("fp32", "bf16", "cpu_validator_draws_it", "passed")},
    "passed": gc["passed"],
    "env": tp["env"],
}
line = json.dumps(record)
(out / "gpu_check.json").write_text(line + "\n")
print(line)
sys.exit(0 if record["passed"] else 1)
PY
