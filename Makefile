# The front door for people. CMake does the building; this file only chains steps.
BUILD ?= build
BUILD_ASAN ?= build-asan
BUILD_FUZZ ?= build-fuzz
PYTHON ?= /usr/bin/python3
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps deps-build configure demo deb test test-unit test-asan test-fuzz test-python test-vm bench kmod clean

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

# Everything: unit, CLI, block-device, Python, sanitizer, fuzz and VM tests.
test: deps
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
