# Thin wrapper over CMake for the two README commands (and a few more).
#   make test    configure, build and run every test through ctest (Release; CTEST_ARGS adds
#                ctest arguments, e.g. CTEST_ARGS="-L mpi")
#   make demo    build and run the main job
#   make bench   build and run the benchmarks (not part of `make test`)
BUILD ?= build
BUILD_TYPE ?= Release
CMAKE_FLAGS ?=
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: all deps configure build test test-quick demo bench install clean

all: build

deps:
	@sh scripts/deps.sh build

configure: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD) -j $(JOBS)

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) $(CTEST_ARGS)

test-quick: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) -L quick

demo:
	@sh scripts/deps.sh demo
	@$(MAKE) --no-print-directory build
	@sh scripts/demo.sh $(BUILD)

bench: build
	@sh scripts/bench.sh $(BUILD)

install: build
	cmake --install $(BUILD) $(if $(PREFIX),--prefix $(PREFIX),)

clean:
	rm -rf $(BUILD)
