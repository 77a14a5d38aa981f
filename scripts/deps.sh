#!/usr/bin/env bash
# Installs what looptune needs to build and test on a Debian machine, only
# where it is missing: a C toolchain, CMake, Ninja, Python 3 with numpy, and
# OpenBLAS (for the prefill benchmark's baseline); for the kafka layer
# librdkafka, protobuf-c and its compiler, pkg-config, and for its tests a
# Java runtime and Maven (the test broker, scripts/kafka/broker.sh) and the
# Python packages protobuf, grpcio-tools and confluent-kafka (the Python
# reader of looptune's topics); XGBoost's C library (the tuner's cost model);
# Intel's ISA-L (CRC32C of the chunks of distributed tensors); Jansson (JSON
# documents: search spaces, HTTP request bodies); LAPACKE (the Cholesky
# factorisations of the Gaussian-process sampler); libmicrohttpd (the HTTP
# gateway) and, for its tests, the openai and prometheus_client packages;
# for the arm64 build of the lower layers (make build-aarch64) Debian's
# aarch64 cross compiler and C library, qemu-user to run its tests, and
# PCRE2 (the byte-level BPE pre-tokenizers) for both architectures.
set -euo pipefail

need_apt=()
command -v cc >/dev/null 2>&1 || need_apt+=(build-essential)
command -v cmake >/dev/null 2>&1 || need_apt+=(cmake)
command -v ninja >/dev/null 2>&1 || need_apt+=(ninja-build)
command -v python3 >/dev/null 2>&1 || need_apt+=(python3 python3-pip)
[ -e /usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h ] || [ -e /usr/include/cblas.h ] ||
    need_apt+=(libopenblas-dev)
[ -e /usr/include/librdkafka/rdkafka.h ] || need_apt+=(librdkafka-dev)
[ -e /usr/include/protobuf-c/protobuf-c.h ] || need_apt+=(libprotobuf-c-dev)
command -v protoc-c >/dev/null 2>&1 || need_apt+=(protobuf-c-compiler)
command -v pkg-config >/dev/null 2>&1 || need_apt+=(pkg-config)
command -v java >/dev/null 2>&1 || need_apt+=(default-jre-headless) # Kafka 4 needs Java 17+
command -v mvn >/dev/null 2>&1 || need_apt+=(maven)
[ -e /usr/include/xgboost/c_api.h ] || need_apt+=(libxgboost-dev)
[ -e /usr/include/pcre2.h ] || need_apt+=(libpcre2-dev) # byte-level BPE pre-tokenizers
[ -e /usr/include/isa-l/crc.h ] || need_apt+=(libisal-dev) # CRC32C of distributed chunks
[ -e /usr/include/jansson.h ] || need_apt+=(libjansson-dev) # JSON documents
[ -e /usr/include/lapacke.h ] || need_apt+=(liblapacke-dev) # Gaussian-process sampler
[ -e /usr/include/zlib.h ] || need_apt+=(zlib1g-dev) # the digits data set of the mlp-digits objective (gzip)
[ -e /usr/include/microhttpd.h ] || need_apt+=(libmicrohttpd-dev) # HTTP gateway
command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || need_apt+=(gcc-aarch64-linux-gnu)
[ -e /usr/aarch64-linux-gnu/include/stdio.h ] || need_apt+=(libc6-dev-arm64-cross)
command -v qemu-aarch64 >/dev/null 2>&1 || command -v qemu-aarch64-static >/dev/null 2>&1 ||
    need_apt+=(qemu-user)

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# PCRE2 for the arm64 build too: Debian's multiarch package (the arm64 architecture added to dpkg)
if [ ! -e /usr/lib/aarch64-linux-gnu/libpcre2-8.so ]; then
    dpkg --print-foreign-architectures | grep -qx arm64 || as_root dpkg --add-architecture arm64
    need_apt+=(libpcre2-dev:arm64)
fi

if [ ${#need_apt[@]} -gt 0 ]; then
    echo "deps: installing ${need_apt[*]} with apt-get" >&2
    as_root apt-get update -q >/dev/null
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need_apt[@]}" >/dev/null
fi

if ! python3 -c 'import numpy' >/dev/null 2>&1; then
    echo "deps: installing numpy for $(command -v python3)" >&2
    python3 -m pip install -q numpy 2>/dev/null ||
        python3 -m pip install -q --break-system-packages numpy 2>/dev/null || {
        as_root apt-get update -q >/dev/null
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-numpy >/dev/null
    }
    python3 -c 'import numpy' || { echo "deps: numpy is not importable by python3" >&2; exit 1; }
fi

# Python packages, each by the module it provides.
pip_install() { # package...
    python3 -m pip install -q "$@" 2>/dev/null ||
        python3 -m pip install -q --break-system-packages "$@"
}
need_pip=()
# the chat templates' reference: the real Jinja templates rendered by jinja2
python3 -c 'import jinja2' >/dev/null 2>&1 || need_pip+=(jinja2)
python3 -c 'import google.protobuf' >/dev/null 2>&1 || need_pip+=(protobuf)
python3 -c 'import grpc_tools.protoc' >/dev/null 2>&1 || need_pip+=(grpcio-tools)
python3 -c 'import confluent_kafka' >/dev/null 2>&1 || need_pip+=(confluent-kafka)
# the references of the quantisation, architecture and tokenizer tests: gguf-py
# (GGUF reading, writing, dequantisation) and Hugging Face's byte-level BPE
python3 -c 'import gguf.quants' >/dev/null 2>&1 || need_pip+=(gguf)
python3 -c 'import tokenizers' >/dev/null 2>&1 || need_pip+=(tokenizers)
# the gateway's clients: the official OpenAI client, Prometheus' text-format parser
python3 -c 'import openai' >/dev/null 2>&1 || need_pip+=(openai)
python3 -c 'import prometheus_client' >/dev/null 2>&1 || need_pip+=(prometheus_client)
if [ ${#need_pip[@]} -gt 0 ]; then
    echo "deps: installing ${need_pip[*]} for $(command -v python3)" >&2
    pip_install "${need_pip[@]}" || { echo "deps: pip could not install ${need_pip[*]}" >&2; exit 1; }
fi
