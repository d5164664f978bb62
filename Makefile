# tessera — top-level entry points. `make demo` and `make test` work on a fresh Debian 12 machine.
SHELL := /bin/bash
# ccache hits across checkouts in different folders (CI clones elsewhere).
export CCACHE_BASEDIR ?= $(CURDIR)
BUILD ?= build
BUILD_ASAN ?= build-asan
BUILD_FUZZ ?= build-fuzz
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
ifeq ($(CI),true)
  CMAKE_FLAGS += -DTESSERA_WERROR=ON
endif

.PHONY: all deps build build-asan models demo test test-all bench fuzz clean

all: build

deps:
	@bash scripts/install-deps.sh

$(BUILD)/build.ninja: CMakeLists.txt | deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

build-asan: deps
	# GCC's sanitizer instrumentation raises false -Wmaybe-uninitialized warnings: no -Werror here.
	cmake -S . -B $(BUILD_ASAN) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSERA_SANITIZE=ON \
	  -DTESSERA_BUILD_BENCH=OFF $(CMAKE_FLAGS) -DTESSERA_WERROR=OFF
	cmake --build $(BUILD_ASAN) -j $(JOBS) --target tessera_unit_tests tessera

models: deps
	@bash scripts/fetch-models.sh
	@bash scripts/fetch-llama-cpp.sh

# The measured partitioner on the det model: costs persist in ~/.cache/tessera/costs.sqlite, so a
# second demo measures (almost) nothing; within the short budget the best plan so far is used.
DEMO_BUDGET ?= 4m
demo: build models
	$(BUILD)/tessera backends
	$(BUILD)/tessera optimize models/ch_PP-OCRv4_det_infer.onnx --shape x=1x3x640x640 --threads 2 \
	  --budget $(DEMO_BUDGET) -o $(BUILD)/det_plan.json --report $(BUILD)/det_report.html
	$(BUILD)/tessera run models/ch_PP-OCRv4_det_infer.onnx --plan $(BUILD)/det_plan.json --threads 2 --repeat 5

# Every test through CTest: the main build (all but the `slow` label), then the unit tests
# once more under ASan+UBSan.
test: build models build-asan
	ctest --test-dir $(BUILD) --output-on-failure -LE slow -j 2
	ASAN_OPTIONS=detect_leaks=1 ctest --test-dir $(BUILD_ASAN) --output-on-failure -L unit -j 2

test-all: build models build-asan
	ctest --test-dir $(BUILD) --output-on-failure -j 2
	ASAN_OPTIONS=detect_leaks=1 ctest --test-dir $(BUILD_ASAN) --output-on-failure -L unit -j 2

# OCR latency next to ONNX Runtime, then every backend side by side (tessera_backend_bench, results in
# $(BUILD)/bench/results/backends.json). BENCH_SUITES="ocr backends" picks; see bench/run.sh.
bench: build models
	@bash bench/run.sh $(BUILD)

# Fuzzes the ONNX importer (libFuzzer + ASan/UBSan, clang) for FUZZ_TIME seconds, from a seed
# corpus of small valid models and the malformed-model corpus. The growing corpus is kept in
# $(BUILD_FUZZ)/corpus; crashing inputs land in $(BUILD_FUZZ)/artifacts/.
FUZZ_TIME ?= 60
FUZZ_SEED_MODELS ?= test_add test_relu test_matmul_2d test_gemm_default_no_bias test_constant \
  test_conv_with_strides_padding test_reshape_reordered_all_dims test_transpose_default \
  test_cast_FLOAT_to_FLOAT16 test_slice test_gather_0 test_concat_2d_axis_0 test_split_equal_parts_1d
fuzz: deps
	CC=clang CXX=clang++ cmake -S . -B $(BUILD_FUZZ) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DTESSERA_FUZZ=ON -DTESSERA_BUILD_TESTS=OFF -DTESSERA_BUILD_BENCH=OFF $(CMAKE_FLAGS)
	cmake --build $(BUILD_FUZZ) -j $(JOBS) --target fuzz_onnx_import
	rm -rf $(BUILD_FUZZ)/seed && mkdir -p $(BUILD_FUZZ)/seed $(BUILD_FUZZ)/corpus $(BUILD_FUZZ)/artifacts
	cp tests/data/malformed/*.onnx $(BUILD_FUZZ)/seed/
	for t in $(FUZZ_SEED_MODELS); do \
	  cp /usr/share/libonnx-testdata/data/node/$$t/model.onnx $(BUILD_FUZZ)/seed/$$t.onnx; done
	$(BUILD_FUZZ)/fuzz_onnx_import -max_total_time=$(FUZZ_TIME) -rss_limit_mb=2048 -timeout=10 \
	  -print_final_stats=1 -artifact_prefix=$(BUILD_FUZZ)/artifacts/ $(BUILD_FUZZ)/corpus $(BUILD_FUZZ)/seed

clean:
	rm -rf $(BUILD) $(BUILD_ASAN) $(BUILD_FUZZ)
