#!/usr/bin/env bash
# The GPU check: one short run (under 5 minutes on one GPU) that a machine with CUDA executes.
#
#   bash scripts/gpu_check.sh [OUT_DIR]
#
# 1. The throughput benchmark with --device cuda (every preset at seq len 64 and 256, fp32 and
#    bf16, 3 s per cell), saved as OUT_DIR/throughput.json.
# 2. A 2-rank smoke test of the torchrun miner's trainer (tests/training/dist_worker.py with
#    WORLD_SIZE=2, DDP), compared with one rank: the pseudo-gradient's relative difference, saved
#    as OUT_DIR/nccl.txt. NCCL with 2 or more GPUs; on a one-GPU machine both ranks share cuda:0
#    and the trainer falls back to gloo (NCCL refuses two ranks on one GPU), which it prints.
# Nothing here needs a chain or storage. Exit status is non-zero if any step fails.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-${OUT:-.beam/gpu_check}}"
mkdir -p "$OUT"
PY="${PYTHON:-python}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

"$PY" -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; print(torch.__version__, torch.cuda.get_device_name(0))"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true

echo "== throughput (--device cuda)"
timeout 200 "$PY" scripts/bench.py throughput --json --device cuda --seconds 3 --tokens 8192 \
    | tee "$OUT/throughput.log" | tail -n 1 > "$OUT/throughput.json"
tail -n 1 "$OUT/throughput.json"

echo "== 2-rank NCCL trainer vs 1 rank"
timeout 120 "$PY" - "$OUT" <<'PY'
import os, socket, subprocess, sys
from pathlib import Path

import torch

sys.path.insert(0, "tests/training")
from dist_worker import train_windows  # noqa: E402
from subnet.training.trainer import Trainer  # noqa: E402

out = Path(sys.argv[1])
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "WORLD_SIZE": "2"}
ngpu = torch.cuda.device_count()
procs = [
    subprocess.Popen([sys.executable, "tests/training/dist_worker.py", "--device", "cuda",
                      "--out", str(out / "nccl.pt"), "--timeout", "60"],
                     env={**env, "RANK": str(r), "LOCAL_RANK": str(r % ngpu)})
    for r in range(2)
]
codes = [p.wait(timeout=110) for p in procs]
assert codes == [0, 0], f"ranks exited with {codes}"
two = torch.load(out / "nccl.pt")
one = train_windows(Trainer(), device="cuda")
lines, rels = [f"{ngpu} GPU(s): backend {'nccl' if ngpu >= 2 else 'gloo (ranks share a GPU)'}"], []
for w in range(2):
    d1, d2 = one[f"delta{w}"], two[f"delta{w}"]
    rel = (sum(((d1[k] - d2[k].to(d1[k].device)) ** 2).sum() for k in d1) ** 0.5
           / sum((d1[k] ** 2).sum() for k in d1) ** 0.5).item()
    rels.append(rel)
    lines.append(f"window {w}: relative difference 2 ranks vs 1 rank {rel:.3e}; "
                 f"loss {two[f'loss{w}']:.6f} vs {one[f'loss{w}']:.6f}")
(out / "nccl.txt").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
assert max(rels) < 1e-3, f"2 ranks differ from 1 rank by {max(rels):.3e}"
PY
echo "gpu check done: $OUT"
