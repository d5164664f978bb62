# tessera — top-level entry points. `make demo` and `make test` work on a fresh Debian 12 machine.
SHELL := /bin/bash
BUILD ?= build
BUILD_ASAN ?= build-asan
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
ifeq ($(CI),true)
  CMAKE_FLAGS += -DTESSERA_WERROR=ON
endif

.PHONY: all deps build build-asan models demo test test-all bench clean

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

demo: build models
	$(BUILD)/tessera run models/ch_PP-OCRv4_det_infer.onnx --shape x=1x3x640x640 --threads 2 --repeat 3

# Every test through CTest: the main build (all but the `slow` label), then the unit tests
# once more under ASan+UBSan.
test: build models build-asan
	ctest --test-dir $(BUILD) --output-on-failure -LE slow -j 2
	ASAN_OPTIONS=detect_leaks=1 ctest --test-dir $(BUILD_ASAN) --output-on-failure -L unit -j 2

test-all: build models build-asan
	ctest --test-dir $(BUILD) --output-on-failure -j 2
	ASAN_OPTIONS=detect_leaks=1 ctest --test-dir $(BUILD_ASAN) --output-on-failure -L unit -j 2

bench: build models
	@bash bench/run.sh $(BUILD)

clean:
	rm -rf $(BUILD) $(BUILD_ASAN)
