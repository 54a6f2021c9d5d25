#!/usr/bin/env bash
# The CUDA check of the graph trainer in one call (6.5 minutes on an H200, 2026-11-28): the
# -m gpu tests of the trainer (the CUDA graph epoch against the per-batch step, one host read per epoch,
# stacks of seeds and data sets, the cross-fit's fold fits of different sizes as one captured
# stack), then benchmarks/train.py --device cuda --epochs 2 (with the five fold fits of one
# sex as one stack against one model, stacked_folds5_over_one). Run from
# the repository root on a fresh GPU machine:
#
#     bash benchmarks/gpu_check.sh
#
# Writes under $OUT (default /tmp/gpu_check_out): env.txt (GPU, python, torch), pytest_gpu.log,
# train_cuda.json (written after each measurement, so a run cut short keeps what it
# measured), train_cuda.log, profile.log and profile.json (benchmarks/train_profile.py: the
# PyTorch profiler over one graph-replayed epoch, where its time goes); the last lines
# printed are a summary; profile_stack.log and .json: the seven-model stack and the five fold
# fits' stack against one model (kernels a step, seconds an epoch).
#
# Install: where PyPI answers, a virtual environment with the project as pyproject pins it
# (python -m venv .venv && .venv/bin/pip install -e '.[dev]', torch 2.13.0). The lent GPU
# machines of this workplace reach no registry (/work/.library/device/README.md): there the
# image's python3 runs the repository as it is (PYTHONPATH; its own torch, numpy, pandas,
# scikit-learn, pytest), and wheels carried in .whl/ (e.g. pytorch-metric-learning, for the
# 7-loss comparison's timing) are installed from there. What the trainer imports needs
# nothing else (polars, xgboost, dagster are not imported on this path). An existing .venv
# with torch is used as it is; PY=/path/to/python picks another.
set -uo pipefail

OUT=${OUT:-/tmp/gpu_check_out}
mkdir -p "$OUT"
export SPHR_PROGRESS=0 PYTHONUNBUFFERED=1
PYTEST_TIMEOUT=${PYTEST_TIMEOUT:-150}
BENCH_TIMEOUT=${BENCH_TIMEOUT:-300}
PROFILE_TIMEOUT=${PROFILE_TIMEOUT:-90}
start=$(date +%s)

online() {
    timeout 6 python3 -c "import urllib.request as u; u.urlopen('https://pypi.org/simple/pip/', timeout=5)" \
        >/dev/null 2>&1
}

if [ -n "${PY:-}" ]; then
    echo "== install: none, PY=$PY"
elif [ -x .venv/bin/python ] && .venv/bin/python -c "import torch" 2>/dev/null; then
    echo "== install: none, .venv is there"
    PY=.venv/bin/python
elif online; then
    echo "== install: PyPI answers, .venv with pyproject's pins"
    python3 -m venv .venv && .venv/bin/pip install -q -e '.[dev]' || exit 1
    PY=.venv/bin/python
else
    echo "== install: no registry; the image's python3 runs the repository (PYTHONPATH)"
    PY=python3
    if compgen -G ".whl/*.whl" >/dev/null; then
        python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl \
            && export PYTHONPATH=/tmp/site
    fi
fi
# the repository itself first on the path, whichever python runs it
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}

{
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv
    $PY - <<'EOF'
import sys, torch
print("python", sys.version.split()[0], "| torch", torch.__version__, "| cuda", torch.version.cuda)
print("device", torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)
print("CUDAGraph.register_generator_state",
      hasattr(torch.cuda.CUDAGraph, "register_generator_state"))
import sphr.train.graph as g
print("sphr.train.graph.capture_supported", g.capture_supported())
EOF
} 2>&1 | tee "$OUT/env.txt"

echo "== pytest -m gpu tests/test_train.py (at most ${PYTEST_TIMEOUT} s)"
timeout "$PYTEST_TIMEOUT" $PY -m pytest -m gpu tests/test_train.py -q -rA -p no:cacheprovider \
    -o log_level=INFO --durations=10 2>&1 | tee "$OUT/pytest_gpu.log"
pytest_rc=${PIPESTATUS[0]}

echo "== benchmarks/train.py --device cuda --epochs 2 (at most ${BENCH_TIMEOUT} s)"
timeout "$BENCH_TIMEOUT" $PY benchmarks/train.py --device cuda --epochs 2 \
    --json-out "$OUT/train_cuda.json" >"$OUT/train_cuda.log" 2>&1
bench_rc=$?
tail -n 40 "$OUT/train_cuda.log"

echo "== benchmarks/train_profile.py --device cuda (at most ${PROFILE_TIMEOUT} s)"
timeout "$PROFILE_TIMEOUT" $PY benchmarks/train_profile.py --device cuda \
    >"$OUT/profile.log" 2>&1
tail -n 1 "$OUT/profile.log" | tee "$OUT/profile.json"

echo "== benchmarks/train_profile.py --device cuda --stack (at most ${PROFILE_TIMEOUT} s)"
timeout "$PROFILE_TIMEOUT" $PY benchmarks/train_profile.py --device cuda --stack \
    >"$OUT/profile_stack.log" 2>&1
tail -n 1 "$OUT/profile_stack.log" | tee "$OUT/profile_stack.json"

echo "== summary ($(( $(date +%s) - start )) s; pytest rc $pytest_rc, benchmark rc $bench_rc)"
grep -E "passed|failed|error" "$OUT/pytest_gpu.log" | tail -n 3
$PY - "$OUT/train_cuda.json" <<'EOF'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except (OSError, ValueError) as err:
    sys.exit(f"no benchmark JSON: {err}")
for k in ("device", "ours_precision", "ours_cuda_graphs_b256", "ours_graph_failed_b256",
          "ours_s_per_epoch_b256", "ours_1000_epochs_s_b256", "fused_nograph_s_per_epoch_b256",
          "graph_steps4_s_per_epoch_b256", "graph_steps16_s_per_epoch_b256",
          "graph_host_syncs_per_epoch_b256", "stacked_folds5_graph_s_per_epoch_b256",
          "stacked_folds5_cuda_graphs", "stacked_folds5_over_one",
          "stacked_k7_graph_s_per_epoch_b256", "stacked_k7_over_one",
          "stacked_k14_graph_s_per_epoch_b256", "stacked_k7_nograph_s_per_epoch_b256",
          "loss_comparison7_s_per_epoch_b256", "ours_validation_s_per_epoch_b256",
          "matmul_floor_s_per_epoch_b256", "ours_s_per_epoch_b4096", "ours_1000_epochs_s_b4096",
          "listing_s_per_epoch_b256", "speedup_ratio_b256", "dynamo_graph_breaks"):
    print(f"{k}: {d.get(k, '(not reached)')}")
EOF
[ "$pytest_rc" -eq 0 ] && [ "$bench_rc" -eq 0 ]
