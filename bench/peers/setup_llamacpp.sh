#!/usr/bin/env bash
# Builds llama-cpp-python from source for this machine, twice, into two
# virtual environments: its default OpenMP build and a pthread build
# (-DGGML_OPENMP=OFF), both with -march=native (GGML_NATIVE=ON). Each compile
# takes 10-25 minutes on 2 vCPUs. Usage: setup_llamacpp.sh [DIR] (default
# /opt/peers); then pass DIR/venv-omp/bin/python and DIR/venv-noomp/bin/python
# to run_llamacpp.py as --config.
set -euo pipefail

dir=${1:-/opt/peers}
version=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
mkdir -p "$dir"

build() { # venv-name extra-cmake-args
    local venv=$dir/$1
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --upgrade pip
    CMAKE_ARGS="-DGGML_NATIVE=ON $2" CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) \
        "$venv/bin/pip" install -v --no-cache-dir --no-binary llama-cpp-python \
        "llama-cpp-python==$version" >"$dir/build-$1.log" 2>&1
    "$venv/bin/pip" install -q gguf
    "$venv/bin/python" -c 'import llama_cpp as l; print(l.__version__, l.llama_print_system_info().decode())'
}

# The multimodal library (LLAVA_BUILD) plays no part in decoding; skipping it
# in the second build only saves compile time.
build venv-omp ""
build venv-noomp "-DGGML_OPENMP=OFF -DLLAVA_BUILD=OFF"
