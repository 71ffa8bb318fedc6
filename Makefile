# Makefile: the front door. Wraps CMake; `make`, `make test`, `make demo`, `make bench`, `make fuzz`.
JOBS      ?= $(shell nproc 2>/dev/null || echo 2)
BUILD     ?= build
ASAN      ?= build-asan
FUZZ      ?= build-fuzz
TESTDATA  ?= $(if $(OX_TESTDATA),$(OX_TESTDATA),$(CURDIR)/../shared/testdata)
DEMO_MODEL ?= $(TESTDATA)/models/kjv-15m-q4_k_m.gguf
FUZZ_SECONDS ?= 20
CUDA_BUILD ?= build-cuda
WEB       ?= build-web
# The CUDA backend: `make CUDA=1` builds it into build/; `make test` compiles it (and runs its
# tests, which skip without a GPU) wherever nvcc is installed.
NVCC      ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
CUDA      ?= 0
# The Vulkan backend: built wherever glslc and Vulkan's headers are (`make test` installs them,
# with Mesa's lavapipe to run its tests on); `make VULKAN=0` leaves it out, `VULKAN=1` insists.
VULKAN    ?= $(if $(and $(shell command -v glslc 2>/dev/null),$(wildcard /usr/include/vulkan/vulkan.h)),1,0)
# Debian packages the build and tests need (installed by `make deps` when missing and root).
DEB_PACKAGES = cmake gcc g++ clang libclang-rt-14-dev libjansson-dev libpcre2-dev \
               libutf8proc-dev libmicrohttpd-dev libcurl4-openssl-dev pkg-config python3 binutils gcc-aarch64-linux-gnu qemu-user \
               python3-venv python3-setuptools python3-numpy python3-pytest python3-mypy \
               python3-jinja2
# Only the tests need these (the chat page in headless Chromium; the Vulkan backend, built and
# run on lavapipe, Mesa's CPU driver): `make test` installs them,
# `make demo` does not.
DEB_TEST_PACKAGES = chromium mesa-vulkan-drivers libvulkan-dev glslc
# The model tests cross-built for AArch64 and run under qemu (tests/model/neon_models_qemu.sh)
# need the libraries for arm64 (Debian multiarch) and the C++ cross compiler CMake asks for.
# Optional: where `make deps` cannot install them (not root, no arm64 archive) that test skips.
DEB_ARM64_PACKAGES = g++-aarch64-linux-gnu libpcre2-dev:arm64 libutf8proc-dev:arm64 \
                     libjansson-dev:arm64

.PHONY: web web-demo test-web all release test test-release test-python test-cuda test-asan fuzz fuzz-long demo bench compare deps deps-test deps-arm64 clean

all: release

# The release build (and so demo, bench, compare) checks the Debian packages first, so
# `make demo` works on a fresh machine.
release: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release \
	  $(if $(filter 1,$(CUDA)),-DOX_CUDA=ON -DCMAKE_CUDA_COMPILER=$(NVCC),-DOX_CUDA=OFF) \
	  -DOX_VULKAN=$(if $(filter 1,$(VULKAN)),ON,OFF) >/dev/null
	cmake --build $(BUILD) -j $(JOBS) -- --no-print-directory

# A package counts as installed for this machine's architecture (or as architecture-independent):
# `make test`'s arm64 libraries of the same names must not stand in for the native ones.
deps:
	@missing=""; arch=$$(dpkg --print-architecture 2>/dev/null); for p in $(DEB_PACKAGES); do \
	  { dpkg-query -W -f='$${Status}' $$p:$$arch 2>/dev/null || \
	    dpkg-query -W -f='$${Status}' $$p:all 2>/dev/null; } | grep -q "ok installed" || \
	    missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then echo "installing:$$missing"; \
	    (apt-get install -y $$missing || (apt-get update && apt-get install -y $$missing)) >/dev/null; \
	  else echo "missing Debian packages:$$missing (run as root or install them)"; exit 1; fi; \
	fi

deps-test:
	@$(MAKE) --no-print-directory deps DEB_PACKAGES="$(DEB_TEST_PACKAGES)"

# The optional arm64 libraries: only `make test` asks for them, not `make demo`.
deps-arm64:
	@missing=""; for p in $(DEB_ARM64_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ] && [ "$$(dpkg --print-architecture 2>/dev/null)" = amd64 ]; then \
	  if [ "$$(id -u)" = 0 ]; then echo "installing (arm64 multiarch):$$missing"; added=""; \
	    dpkg --print-foreign-architectures | grep -qx arm64 || { dpkg --add-architecture arm64 && added=1; }; \
	    if ! (apt-get update && apt-get install -y --no-install-recommends $$missing) >/dev/null; then \
	      echo "could not install:$$missing (the test_neon_models_qemu tests will be skipped)"; \
	      if [ -n "$$added" ]; then dpkg --remove-architecture arm64 && apt-get update >/dev/null || true; fi; \
	    fi; \
	  else echo "not installed:$$missing (optional, needs root: the test_neon_models_qemu tests will be skipped)"; fi; \
	fi

# The browser build (web/README.md): Debian's emscripten, PCRE2 and utf8proc built for it from
# Debian's sources (web/deps.sh), then the library, the JavaScript API and the demo page in
# $(WEB)/site/. Debian's emscripten finds its JavaScript tools (acorn) through NODE_PATH.
DEB_WEB_PACKAGES = emscripten dpkg-dev cmake pkg-config
WEB_ENV = NODE_PATH=/usr/share/nodejs PKG_CONFIG_LIBDIR=$(CURDIR)/$(WEB)/deps/lib/pkgconfig
web:
	@$(MAKE) --no-print-directory deps DEB_PACKAGES="$(DEB_WEB_PACKAGES)"
	sh web/deps.sh $(WEB)/deps
	$(WEB_ENV) emcmake cmake -S . -B $(WEB) -DCMAKE_BUILD_TYPE=Release >/dev/null
	$(WEB_ENV) cmake --build $(WEB) -j $(JOBS) -- --no-print-directory

# The demo at http://127.0.0.1:8090/ (the kjv test model is its default).
web-demo: web
	node web/serve.mjs $(WEB)/site --port 8090 --models $(TESTDATA)/models

# Everything CI runs: release build + tests, ASan/UBSan build + tests, a short fuzz run.
test: deps deps-test deps-arm64
	$(MAKE) test-release
	$(MAKE) test-python
	$(MAKE) test-web
	$(MAKE) test-asan
	$(if $(NVCC),$(MAKE) test-cuda,@echo "no nvcc: the CUDA backend is not built")
	$(MAKE) fuzz FUZZ_SECONDS=$(FUZZ_SECONDS)

test-release: release
	cd $(BUILD) && OX_TESTDATA=$(TESTDATA) ctest --output-on-failure -j $(JOBS)

# The Python package (bindings/python) installed into a throwaway virtual environment that sees
# Debian's numpy and pytest, with the release build's library; its tests check it against the
# release build's binary. Debian's interpreter: the package needs nothing from PyPI.
PYTHON ?= /usr/bin/python3
PYVENV ?= $(BUILD)/python-venv
test-python: release
	rm -rf $(PYVENV)
	$(PYTHON) -m venv --system-site-packages $(PYVENV)
	OX_LIBRARY=$(CURDIR)/$(BUILD)/liboxidize.so $(PYVENV)/bin/pip install -q --no-index \
	  --no-build-isolation ./bindings/python
	cd bindings/python/tests && OX_TESTDATA=$(TESTDATA) OX_BIN=$(CURDIR)/$(BUILD)/apps/oxidize/oxidize \
	  $(CURDIR)/$(PYVENV)/bin/python -m pytest -q -p no:cacheprovider
	$(PYTHON) -m mypy --strict --cache-dir $(BUILD)/mypy-cache bindings/python/oxidize \
	  bindings/python/examples

# The browser build in headless Chromium against the release build (tests/web/test_web.py).
test-web: release web
	OX_TESTDATA=$(TESTDATA) $(PYTHON) tests/web/test_web.py $(BUILD)/apps/oxidize/oxidize \
	  $(WEB)/site $(WEB)/web

# The CUDA build's own tests (the rest of the suite is the release build's); GPU tests report
# themselves skipped on machines without one.
test-cuda:
	cmake -S . -B $(CUDA_BUILD) -DCMAKE_BUILD_TYPE=Release -DOX_CUDA=ON \
	  -DCMAKE_CUDA_COMPILER=$(NVCC) >/dev/null
	cmake --build $(CUDA_BUILD) -j $(JOBS) -- --no-print-directory
	cd $(CUDA_BUILD) && OX_TESTDATA=$(TESTDATA) ctest --output-on-failure -R cuda

# With the Vulkan backend where it is built: its op tests run here too (the model tests on it,
# named @vulkan, run in the release build only: under ASan they would add minutes, not checks;
# the @mesa-next ones run there too: Debian 13's loader under Debian 12's sanitizer runtime).
test-asan:
	CC=clang CXX=clang++ cmake -S . -B $(ASAN) -DCMAKE_BUILD_TYPE=Debug -DOX_SANITIZE=ON \
	  -DOX_VULKAN=$(if $(filter 1,$(VULKAN)),ON,OFF) >/dev/null
	cmake --build $(ASAN) -j $(JOBS) -- --no-print-directory
	cd $(ASAN) && OX_TESTDATA=$(TESTDATA) ASAN_OPTIONS=detect_leaks=1 \
	  LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp \
	  UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j $(JOBS) -E '@vulkan|@mesa-next'


# libFuzzer targets (clang), each run for FUZZ_SECONDS from a seed corpus of the shared models,
# JOBS at a time (each single-threaded, in a corpus folder of its own; xargs fails when one does).
fuzz:
	CC=clang CXX=clang++ cmake -S . -B $(FUZZ) -DCMAKE_BUILD_TYPE=Debug -DOX_FUZZ=ON >/dev/null
	cmake --build $(FUZZ) -j $(JOBS) --target fuzz_gguf fuzz_tokenizer fuzz_jinja fuzz_grammar \
	  fuzz_json_schema fuzz_hub fuzz_server fuzz_lora fuzz_sampler_state fuzz_dist fuzz_split_wire \
	  -- --no-print-directory
	printf '%s\n' gguf tokenizer jinja grammar json_schema hub server lora sampler_state dist \
	  split_wire | OX_TESTDATA=$(TESTDATA) xargs -P $(JOBS) -I{} \
	  tests/fuzz/run.sh $(FUZZ)/tests/fuzz/fuzz_{} $(FUZZ_SECONDS)

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
