#!/usr/bin/env bash
# Reproduces the figures quoted for the runtime and kernel looping, side by side
# with their baselines in one run each:
#   1. decode tokens/s, looped against dispatch executor (--compare-executors),
#      with the synchronisation share and the fraction of read-only bandwidth;
#   2. decode tokens/s against llama.cpp (if a Python with llama-cpp-python is
#      given in LLAMACPP_PYTHON; bench/peers/setup_llamacpp.sh builds one);
#   3. prefill GEMM GFLOP/s against OpenBLAS sgemm.
# Models (random weights) go to $MODELS (default /tmp/looptune-bench).
# The machine should be otherwise idle: every figure is min/median/max of
# interleaved runs, but a loaded 2-core machine still moves them.
set -euo pipefail
cd "$(dirname "$0")/.."
LT=${LT:-build/looptune}
MODELS=${MODELS:-/tmp/looptune-bench}
RUNS=${RUNS:-5}
mkdir -p "$MODELS"

shapes="stories15M stories110M 1B"
dtypes="f32 q8_0"
for s in $shapes; do
    for d in $dtypes; do
        f="$MODELS/$s-$d.gguf"
        [ -f "$f" ] || "$LT" model-gen --preset "$s" --dtype "$d" -o "$f"
    done
done

echo "## looped vs dispatch executor"
for s in $shapes; do
    for d in $dtypes; do
        for t in 1 2; do
            echo "### $s $d, $t thread(s)"
            "$LT" bench -m "$MODELS/$s-$d.gguf" -t "$t" -r "$RUNS" -n 64 --compare-executors
        done
    done
done

if [ -n "${LLAMACPP_PYTHON:-}" ]; then
    echo "## looptune vs llama.cpp (decode)"
    args=()
    for s in $shapes; do for d in $dtypes; do args+=(--model "$s-$d=$MODELS/$s-$d.gguf"); done; done
    # llama.cpp on its default (fastest) path: Q8_0 repacked for AMX/VNNI. The probe feeds
    # the prompt one token per call, which avoids the GCC 12 AMX tile-setup crash on batches.
    python3 bench/decode_vs_llamacpp.py --looptune "$LT" --llamacpp-python "$LLAMACPP_PYTHON" \
        "${args[@]}" --threads 1 2 --rounds "$RUNS"
fi

echo "## the q4_0 .. q6_k dots alone, every ISA path of this CPU"
for t in q4_0 q4_k q6_k; do [ -x build/bench_qdot ] && build/bench_qdot --type "$t"; done

echo "## prefill GEMM against OpenBLAS"
[ -x build/bench_matmul ] && build/bench_matmul

echo "## hyperparameter samplers: regret on known optima, proposal time"
[ -x build/bench_hpo ] && build/bench_hpo
