#!/usr/bin/env bash
# The GPU measurements of docs/gpu.md, from binaries built elsewhere, for a
# GPU machine that has no Rust toolchain and no network (PyTorch and its CUDA libraries only).
#
# Build on a machine with the toolchain, then copy the three binaries (xz-compressed or not) to
# BIN_DIR on the GPU machine, with this checkout beside them:
#
#   cargo bench --workspace --profile dev --bench throughput --no-run   # → target/debug/deps/throughput-*
#   cargo test  --workspace --test wgpu_step --no-run                   # → target/debug/deps/wgpu_step-*
#   cargo build --workspace --bin train                                 # → target/debug/train
#
# and run `xtask/gpu/measure.sh BIN_DIR OUT_DIR [PML_WHEEL_DIR]` from the checkout's root. The
# last argument installs pytorch-metric-learning from wheels when the machine lacks it. Each step
# has a time limit and a failed step does not stop the others; the JSON lines, the logs and a
# summary land in OUT_DIR.
#
# What it measures, in this order:
# 1. one training step on wgpu agreeing with the same step on flex (the `wgpu_step` test);
# 2. `throughput --device wgpu`: the three CPU workloads and ResNet-50 224² at batch 64;
# 3. the same workloads in PyTorch + PML on CUDA (`xtask/peers/train.py --device cuda`), with
#    cuDNN's TF32 convolutions (PyTorch's default) and in f32 (`--no-tf32`), as wgpu computes;
# 4. the default training run (`train` with no arguments but the device) on wgpu and on flex;
# 5. the cost of autotuning: ResNet-50 b64 with cubecl's least tuning effort
#    (CUBECL_AUTOTUNE_LEVEL=minimal; the throughput bench runs at cubecl's default, `balanced`),
#    and the default run on wgpu at `balanced` (`train` itself defaults to `minimal`).
set -u
bin=${1:?usage: measure.sh BIN_DIR OUT_DIR [PML_WHEEL_DIR]}
out=${2:?usage: measure.sh BIN_DIR OUT_DIR [PML_WHEEL_DIR]}
wheels=${3:-}
mkdir -p "$out"
work=$(mktemp -d)
log="$out/log.txt"

step() {
    # step NAME SECONDS COMMAND...: runs COMMAND under a time limit, its output appended to the
    # log and kept in $work/NAME.txt; prints the exit status.
    local name=$1 limit=$2
    shift 2
    echo "== $name: $*" | tee -a "$log"
    local start=$SECONDS
    timeout "$limit" "$@" >"$work/$name.txt" 2>&1
    local rc=$?
    cat "$work/$name.txt" >>"$log"
    echo "== $name: exit $rc after $((SECONDS - start)) s" | tee -a "$log"
}

for f in throughput wgpu_step train; do
    if [ -f "$bin/$f.xz" ]; then
        # Python's lzma, as the machine may lack the xz program.
        python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
            "$bin/$f.xz" "$work/$f"
    elif [ -f "$bin/$f" ]; then
        cp "$bin/$f" "$work/$f"
    else
        echo "measure.sh: $bin has no $f or $f.xz" >&2
        exit 2
    fi
    chmod +x "$work/$f"
done
if [ -n "$wheels" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$work/site" "$wheels"/*.whl
    export PYTHONPATH="$work/site${PYTHONPATH:+:$PYTHONPATH}"
fi

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv | tee -a "$log"
nproc | sed 's/^/cores: /' | tee -a "$log"

step agree_wgpu 300 env DML_STEP_DEVICE=wgpu "$work/wgpu_step" --nocapture
step ours_wgpu 300 "$work/throughput" --device wgpu --steps 10
step torch_cuda 300 python3 xtask/peers/train.py --device cuda --steps 10 --threads "$(nproc)"
step torch_cuda_f32 300 python3 xtask/peers/train.py --device cuda --no-tf32 --steps 10 --threads "$(nproc)"

# The measurement lines (JSON, one per line) of both sides.
grep -h '^{' "$work/ours_wgpu.txt" >"$out/ours.jsonl"
grep -h '^{' "$work/torch_cuda.txt" >"$out/peer.jsonl"
grep -h '^{' "$work/torch_cuda_f32.txt" >"$out/peer_f32.jsonl"

# A summary table: seconds per step, ours on wgpu against PyTorch on CUDA (TF32, then f32), and
# the ratios (the peer's time over ours: above 1, ours is faster).
python3 - "$out/ours.jsonl" "$out/peer.jsonl" "$out/peer_f32.jsonl" <<'EOF' | tee -a "$log"
import json, sys
ours = {r["id"]: r for r in map(json.loads, open(sys.argv[1]))}
peers = [{r["ours"]: r for r in map(json.loads, open(path))} for path in sys.argv[2:]]
print(f"{'workload':28} {'ours wgpu':>10} {'torch tf32':>10} {'ratio':>6} {'torch f32':>10} {'ratio':>6}")
for name, r in ours.items():
    cells = []
    for peer in peers:
        p = peer.get(name)
        cells.append(f"{p['seconds'] * 1e3:7.1f} ms {p['seconds'] / r['seconds']:6.3f}" if p else f"{'-':>10} {'-':>6}")
    print(f"{name:28} {r['seconds'] * 1e3:7.1f} ms " + " ".join(cells))
EOF
step default_wgpu 300 "$work/train" --device wgpu --name gpu-wgpu --set "run_dir=\"$work/runs\""
step default_flex 300 "$work/train" --device flex --name gpu-flex --set "run_dir=\"$work/runs\""
step ours_wgpu_minimal 300 env CUBECL_AUTOTUNE_LEVEL=minimal "$work/throughput" --device wgpu --steps 10 --only resnet50_224px_b64
step default_wgpu_balanced 300 env CUBECL_AUTOTUNE_LEVEL=balanced "$work/train" --device wgpu --name gpu-wgpu-balanced --set "run_dir=\"$work/runs\""

# The last steps' measurements, and the runs' results and metrics.
grep -h '^{' "$work/ours_wgpu_minimal.txt" | tee -a "$log"
for run in default_wgpu default_flex default_wgpu_balanced; do
    echo "$run: $(grep -h 'P@1 .* →' "$work/$run.txt") $(grep -h 'wall time' "$work/$run.txt")" | tee -a "$log"
done
for run in gpu-wgpu gpu-flex gpu-wgpu-balanced; do
    [ -f "$work/runs/$run/metrics.jsonl" ] && cp "$work/runs/$run/metrics.jsonl" "$out/$run.metrics.jsonl"
done
