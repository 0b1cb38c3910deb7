# The front door for people. CMake does the building; this file only chains steps.
BUILD ?= build
BUILD_ASAN ?= build-asan
BUILD_FUZZ ?= build-fuzz
PYTHON ?= /usr/bin/python3
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
# The formatter the style is tuned to (Debian 12's); other versions format differently.
CLANG_FORMAT ?= clang-format-14
# C++ sources under .clang-format. kmod/ and format/ keep the kernel's style.
CXX_SOURCES = $(shell find lib tools python/src tests bench -name '*.cpp' -o -name '*.hpp' -o -name '*.h' | sort)

.PHONY: all deps deps-build configure demo deb check-format format test test-unit test-asan test-fuzz test-python test-vm bench kmod clean

all: configure
	cmake --build $(BUILD) -j $(JOBS)

deps-build:
	WBKIT_NO_VM=1 scripts/install-deps.sh

deps:
	scripts/install-deps.sh

configure: deps-build
	@test -f $(BUILD)/CMakeCache.txt || cmake -S . -B $(BUILD) -DPython3_EXECUTABLE=$(PYTHON) $(CMAKE_FLAGS)

# The main job on the bundled demo cache image.
demo: all
	scripts/demo.sh $(BUILD)

# The Debian packages wbkit, python3-wbkit and dm-wbkit-dkms, into $(BUILD)/.
deb: all
	cd $(BUILD) && cpack -G DEB

# Style first: it takes seconds and fails before the long part starts.
check-format: deps-build
	$(CLANG_FORMAT) --dry-run -Werror $(CXX_SOURCES)

# Rewrites the C++ sources to .clang-format.
format: deps-build
	$(CLANG_FORMAT) -i $(CXX_SOURCES)

# Everything: format, unit, CLI, Python, sanitizer, fuzz and VM tests.
test: deps
	$(MAKE) check-format
	$(MAKE) all
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	$(MAKE) test-asan
	$(MAKE) test-fuzz
	$(MAKE) test-vm

test-unit: all
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-asan: deps-build
	@test -f $(BUILD_ASAN)/CMakeCache.txt || cmake -S . -B $(BUILD_ASAN) -DWBKIT_SANITIZE=ON -DWBKIT_PYTHON=OFF -DCMAKE_BUILD_TYPE=Debug
	cmake --build $(BUILD_ASAN) -j $(JOBS)
	cd $(BUILD_ASAN) && ctest --output-on-failure -j $(JOBS) -L unit

test-fuzz: deps-build
	@test -f $(BUILD_FUZZ)/CMakeCache.txt || cmake -S . -B $(BUILD_FUZZ) -DWBKIT_FUZZ=ON -DWBKIT_PYTHON=OFF -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++
	cmake --build $(BUILD_FUZZ) -j $(JOBS) --target fuzz_parsers
	tests/fuzz/run.sh $(BUILD_FUZZ)

test-vm: deps all
	tests/vm/run-all.sh $(BUILD)

bench: all
	bench/run.sh $(BUILD)

kmod: deps
	$(MAKE) -C kmod

clean:
	rm -rf $(BUILD) $(BUILD_ASAN) $(BUILD_FUZZ)
	-$(MAKE) -C kmod clean
