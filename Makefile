# The two commands of the README: `make run` and `make test`. Both install
# what is missing (scripts/deps.sh), then build.
BUILD      ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
PORTABLE_BUILD ?= build-portable
AARCH64_BUILD ?= build-aarch64
# The tests of everything that shares data between threads: pool, executors, node timer,
# telemetry, batched decode, the serve batcher and decode thread.
TSAN_TESTS := test_pool test_program test_exec_looped test_fuse_pass test_epilogue_pass test_llama_exec test_apply test_tuning test_tel_ring \
              test_tel_runtime test_tel_llama test_online test_batch_decode test_batcher test_decoder
MODELS     ?= models
DEMO       := $(MODELS)/stories110M-q8_0.gguf
LOOPTUNE   := $(BUILD)/looptune
CMAKE_GEN  := $(shell command -v ninja >/dev/null 2>&1 && echo "-G Ninja")

.PHONY: all deps build build-asan build-tsan build-portable build-aarch64 test-aarch64 run test \
	bench clean

all: build

deps:
	@scripts/deps.sh

build: deps
	@cmake -S . -B $(BUILD) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Release -DLT_WERROR=ON >/dev/null
	@cmake --build $(BUILD)

# Unit tests under AddressSanitizer + UndefinedBehaviorSanitizer.
build-asan: deps
	@cmake -S . -B $(ASAN_BUILD) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLT_WERROR=ON \
		-DLT_SANITIZE=address,undefined >/dev/null
	@cmake --build $(ASAN_BUILD)

# The binary for any x86-64 (-DLT_NATIVE=OFF): every file compiled for the
# baseline ISA but the ISA files, each with its own flags only, so a file that
# needs flags it lacks fails here on any host; kernels are still chosen at run
# time, so its kernel and logits tests run every path this CPU has.
build-portable: deps
	@cmake -S . -B $(PORTABLE_BUILD) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Release -DLT_WERROR=ON \
		-DLT_NATIVE=OFF >/dev/null
	@cmake --build $(PORTABLE_BUILD)

# The layers below kafka (core, kernels, program, model) and their unit tests
# cross-compiled for 64-bit Arm (cmake/aarch64-linux-gnu.cmake: Debian's
# gcc-aarch64-linux-gnu, portable kernels only); test-aarch64 runs them under
# qemu-user (ctest starts each through CMAKE_CROSSCOMPILING_EMULATOR).
build-aarch64: deps
	@CMAKE_TOOLCHAIN_FILE=$(CURDIR)/cmake/aarch64-linux-gnu.cmake cmake -S . -B $(AARCH64_BUILD) \
		$(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Release -DLT_WERROR=ON -DLT_LOWER_LAYERS_ONLY=ON >/dev/null
	@cmake --build $(AARCH64_BUILD)

AARCH64_CTEST = cd $(AARCH64_BUILD) && ctest --output-on-failure -j2 --timeout 900
test-aarch64: build-aarch64
	$(AARCH64_CTEST)

# The threaded tests under ThreadSanitizer.
build-tsan: deps
	@cmake -S . -B $(TSAN_BUILD) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLT_WERROR=ON \
		-DLT_SANITIZE=thread >/dev/null
	@cmake --build $(TSAN_BUILD) --target $(TSAN_TESTS)

$(DEMO): | build
	@mkdir -p $(MODELS)
	$(LOOPTUNE) model-gen --preset stories110M --dtype q8_0 --vocab-file tests/data/llama2-tokenizer.bin -o $@

# The main job: text generation on the demo model, with the run summary.
run: build $(DEMO)
	$(LOOPTUNE) run -m $(DEMO) -p "Once upon a time" -n 800 --temp 0.8 --seed 42 --tune online

# The kafka tests that need a real Apache Kafka broker (test_broker_*, the
# Python readers) start one through a ctest fixture: kafka_broker_start runs
# scripts/kafka/broker.sh start before them, kafka_broker_stop runs
# broker.sh stop after them, also when they fail. Under the sanitizers only
# the kafka tests that need no broker run (codec, properties, mock cluster).
# The unit tests of the layers that call no kernel (kafka, hpo, http): the same
# on every ISA, so the re-runs under LT_ISA_MAX leave them out.
ISA_FREE_TESTS := $(subst $(eval) ,|,$(basename $(notdir $(wildcard tests/kafka/test_*.c \
                  tests/hpo/test_*.c tests/http/test_*.c))))
test: build build-asan build-tsan build-portable build-aarch64
	@# the unit and end-to-end tests two at a time (none times itself tighter than its
	@# work takes with a neighbour), then the broker's one at a time
	cd $(BUILD) && ctest -j2 --output-on-failure --timeout 900 -L 'quick|kernel|e2e' && \
		ctest --output-on-failure --timeout 900 -L kafka
	@# the machines of a fleet's smaller kinds, on this one (LT_ISA_MAX, core.h): tests
	@# that assume this CPU's ISA fail here, on any CI host
	@# (the unit tests two at a time: nothing in them depends on the machine's speed; the
	@# closed loop on the broker alone, as in the main run)
	if grep -qw avx512f /proc/cpuinfo; then cd $(BUILD) && LT_ISA_MAX=avx2 ctest -j2 \
		--output-on-failure --timeout 900 -R '^(test_|py_test_logits$$|py_test_cli$$)' \
		-E '^(test_broker_.*|$(ISA_FREE_TESTS))$$' && LT_ISA_MAX=avx2 ctest --output-on-failure \
		--timeout 900 -R '^py_test_broker_loop$$'; fi
	cd $(BUILD) && LT_ISA_MAX=portable ctest -j2 --output-on-failure -L 'quick|kernel' \
		-E '^($(ISA_FREE_TESTS))$$' --timeout 900
	cd $(PORTABLE_BUILD) && ctest -j2 --output-on-failure -L kernel --timeout 900 && \
		ctest --output-on-failure -R '^py_test_logits$$' --timeout 900
	$(AARCH64_CTEST)
	cd $(ASAN_BUILD) && ctest -j2 --output-on-failure -L 'quick|kernel' --timeout 900 && \
		ctest --output-on-failure -L kafka -E '^(test_broker_|kafka_broker_)' --timeout 900
	cd $(TSAN_BUILD) && ctest --output-on-failure --timeout 900 \
		-R '^($(subst $(eval) ,|,$(TSAN_TESTS)))$$'

bench: build
	bench/run_all.sh

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(PORTABLE_BUILD) $(AARCH64_BUILD)
