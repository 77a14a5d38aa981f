#!/usr/bin/env bash
# Builds the llama.cpp peers that looptune's decode benchmarks compare against.
#
#   setup_llamacpp.sh [DIR]                  (default DIR: /opt/peers)
#     llama-cpp-python from source for this machine, twice, into two virtual
#     environments: its default OpenMP build and a pthread build
#     (-DGGML_OPENMP=OFF), both with -march=native (GGML_NATIVE=ON). Each
#     compile takes 10-25 minutes on 2 vCPUs. Then pass DIR/venv-omp/bin/python
#     and DIR/venv-noomp/bin/python to run_llamacpp.py as --config, or one of
#     them to decode_vs_llamacpp.py as --llamacpp-python.
#
#   setup_llamacpp.sh --llama-bench [DIR] [VARIANT...]   (variants: native avx2 avxvnni)
#     llama.cpp's own `llama-bench`, built with CMake from the llama.cpp tree
#     that PyPI's llama-cpp-python source package vendors (the same code as the
#     venvs above), into DIR/llamacpp-VARIANT/bin/llama-bench:
#       native: -DGGML_NATIVE=ON  (everything this CPU has, AVX-512 included)
#       avx2:   -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON
#               -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=OFF
#               -DGGML_AVX512_VNNI=OFF -DGGML_AVX_VNNI=OFF
#       avxvnni: avx2's flags but -DGGML_AVX_VNNI=ON (vpdpbusd in VEX form,
#               as Intel's client cores since Alder Lake and AMD's Zen 5 have)
#     (to set against `looptune bench --isa avx2`, which takes AVX-VNNI where
#     the CPU has it). All share:
#       -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF
#       -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF
#     and ggml's default threading (OpenMP) and shared libraries; only the
#     llama-bench target is built (about 10-20 minutes each on 2 vCPUs). The
#     build directory is DIR/llamacpp-VARIANT itself (the binary finds its
#     libllama/libggml there through its RPATH). The source package is fetched
#     with pip into DIR/src and unpacked there; nothing of it enters this
#     repository. Then:
#       bench/decode_vs_llamacpp.py --llama-bench DIR/llamacpp-avx2/bin/llama-bench --isa avx2 ...
set -euo pipefail

version=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}

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

# The llama.cpp tree inside llama-cpp-python's source package, fetched and
# unpacked once into $dir/src; prints its path.
llamacpp_source() {
    local src=$dir/src tree=$dir/src/llama_cpp_python-$version/vendor/llama.cpp
    if [ ! -f "$tree/CMakeLists.txt" ]; then
        mkdir -p "$src"
        python3 -m pip download -q --no-binary :all: --no-deps \
            "llama-cpp-python==$version" -d "$src" >&2
        tar -xzf "$src/llama_cpp_python-$version.tar.gz" -C "$src"
    fi
    echo "$tree"
}

# build_llama_bench VARIANT: configures and builds DIR/llamacpp-VARIANT with
# the flags listed at the top, then prints the binary's system-info line.
build_llama_bench() {
    local variant=$1 tree out isa
    case $variant in
        native) isa=(-DGGML_NATIVE=ON) ;;
        avx2) isa=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON
                   -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=OFF
                   -DGGML_AVX512_VNNI=OFF -DGGML_AVX_VNNI=OFF) ;;
        avxvnni) isa=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON
                   -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=OFF
                   -DGGML_AVX512_VNNI=OFF -DGGML_AVX_VNNI=ON) ;;
        *) echo "unknown llama-bench variant: $variant (native, avx2, avxvnni)" >&2; return 2 ;;
    esac
    tree=$(llamacpp_source)
    out=$dir/llamacpp-$variant
    cmake -S "$tree" -B "$out" -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF \
        -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
        -DLLAMA_BUILD_SERVER=OFF "${isa[@]}" >"$dir/build-llamacpp-$variant.log" 2>&1
    cmake --build "$out" --target llama-bench -j "$(nproc)" \
        >>"$dir/build-llamacpp-$variant.log" 2>&1
    # llama-bench never prints llama_print_system_info(); ask its libllama (the
    # line lists the ISA paths compiled in: the avx2 variant shows AVX2 = 1 and
    # no AVX512).
    { "$out/bin/llama-bench" --version 2>&1 || true; } | sed -n 1p # (head would end the pipe early: SIGPIPE under pipefail)
    echo "$out/bin/llama-bench"
    python3 -c 'import ctypes, sys
l = ctypes.CDLL(sys.argv[1]); l.llama_print_system_info.restype = ctypes.c_char_p
print(l.llama_print_system_info().decode())' "$out/bin/libllama.so"
}

if [ "${1:-}" = "--llama-bench" ]; then
    shift
    dir=${1:-/opt/peers}
    [ $# -gt 0 ] && shift
    mkdir -p "$dir"
    variants=("$@")
    [ ${#variants[@]} -gt 0 ] || variants=(native avx2)
    for v in "${variants[@]}"; do build_llama_bench "$v"; done
    exit 0
fi

dir=${1:-/opt/peers}
mkdir -p "$dir"
# The multimodal library (LLAVA_BUILD) plays no part in decoding; skipping it
# in the second build only saves compile time.
build venv-omp ""
build venv-noomp "-DGGML_OPENMP=OFF -DLLAVA_BUILD=OFF"
