# Makefile: the front door. Wraps CMake; `make`, `make test`, `make demo`, `make bench`, `make fuzz`.
JOBS      ?= $(shell nproc 2>/dev/null || echo 2)
BUILD     ?= build
ASAN      ?= build-asan
FUZZ      ?= build-fuzz
TESTDATA  ?= $(if $(OX_TESTDATA),$(OX_TESTDATA),$(CURDIR)/../shared/testdata)
DEMO_MODEL ?= $(TESTDATA)/models/kjv-15m-q4_k_m.gguf
FUZZ_SECONDS ?= 20
CUDA_BUILD ?= build-cuda
# The CUDA backend: `make CUDA=1` builds it into build/; `make test` compiles it (and runs its
# tests, which skip without a GPU) wherever nvcc is installed.
NVCC      ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
CUDA      ?= 0
# Debian packages the build and tests need (installed by `make deps` when missing and root).
DEB_PACKAGES = cmake gcc g++ clang libclang-rt-14-dev libjansson-dev libpcre2-dev \
               libutf8proc-dev libmicrohttpd-dev pkg-config python3 binutils gcc-aarch64-linux-gnu qemu-user

.PHONY: all release test test-release test-cuda test-asan fuzz fuzz-long demo bench compare deps clean

all: release

# The release build (and so demo, bench, compare) checks the Debian packages first, so
# `make demo` works on a fresh machine.
release: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release \
	  $(if $(filter 1,$(CUDA)),-DOX_CUDA=ON -DCMAKE_CUDA_COMPILER=$(NVCC),-DOX_CUDA=OFF) >/dev/null
	cmake --build $(BUILD) -j $(JOBS) -- --no-print-directory

deps:
	@missing=""; for p in $(DEB_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then echo "installing:$$missing"; \
	    (apt-get install -y $$missing || (apt-get update && apt-get install -y $$missing)) >/dev/null; \
	  else echo "missing Debian packages:$$missing (run as root or install them)"; exit 1; fi; \
	fi

# Everything CI runs: release build + tests, ASan/UBSan build + tests, a short fuzz run.
test: deps
	$(MAKE) test-release
	$(MAKE) test-asan
	$(if $(NVCC),$(MAKE) test-cuda,@echo "no nvcc: the CUDA backend is not built")
	$(MAKE) fuzz FUZZ_SECONDS=$(FUZZ_SECONDS)

test-release: release
	cd $(BUILD) && OX_TESTDATA=$(TESTDATA) ctest --output-on-failure -j $(JOBS)

# The CUDA build's own tests (the rest of the suite is the release build's); GPU tests report
# themselves skipped on machines without one.
test-cuda:
	cmake -S . -B $(CUDA_BUILD) -DCMAKE_BUILD_TYPE=Release -DOX_CUDA=ON \
	  -DCMAKE_CUDA_COMPILER=$(NVCC) >/dev/null
	cmake --build $(CUDA_BUILD) -j $(JOBS) -- --no-print-directory
	cd $(CUDA_BUILD) && OX_TESTDATA=$(TESTDATA) ctest --output-on-failure -R cuda

test-asan:
	CC=clang CXX=clang++ cmake -S . -B $(ASAN) -DCMAKE_BUILD_TYPE=Debug -DOX_SANITIZE=ON >/dev/null
	cmake --build $(ASAN) -j $(JOBS) -- --no-print-directory
	cd $(ASAN) && OX_TESTDATA=$(TESTDATA) ASAN_OPTIONS=detect_leaks=1 \
	  UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j $(JOBS)

# libFuzzer targets (clang), each run for FUZZ_SECONDS from a seed corpus of the shared models.
fuzz:
	CC=clang CXX=clang++ cmake -S . -B $(FUZZ) -DCMAKE_BUILD_TYPE=Debug -DOX_FUZZ=ON >/dev/null
	cmake --build $(FUZZ) -j $(JOBS) --target fuzz_gguf fuzz_tokenizer fuzz_jinja fuzz_grammar \
	  fuzz_json_schema -- --no-print-directory
	for t in gguf tokenizer jinja grammar json_schema; do \
	  OX_TESTDATA=$(TESTDATA) tests/fuzz/run.sh $(FUZZ)/tests/fuzz/fuzz_$$t $(FUZZ_SECONDS) || exit 1; \
	done

fuzz-long:
	$(MAKE) fuzz FUZZ_SECONDS=3600

DEMO_PROMPT ?= And God said
demo: release
	$(BUILD)/apps/oxidize/oxidize run -m $(DEMO_MODEL) -p "$(DEMO_PROMPT)" -n 128

bench: release
	bench/run.sh $(BUILD) $(TESTDATA)

# oxidize vs llama.cpp (node-llama-cpp) on generated Llama-3.2-1B-shaped files: bench/README.md
compare: release
	bench/compare.sh --no-build

clean:
	rm -rf $(BUILD) $(ASAN) $(FUZZ) $(CUDA_BUILD)
