# The front door for people. CMake does the building; this file only chains steps.
BUILD ?= build
BUILD_ASAN ?= build-asan
BUILD_FUZZ ?= build-fuzz
BUILD_TSAN ?= build-tsan
# The engine fuzzer without AddressSanitizer, for long runs (make fuzz-long).
BUILD_FUZZ_FAST ?= build-fuzz-fast
# make fuzz-long FUZZ_SECONDS=3600 (or FUZZ_RUNS=10000000); the replay
# decision's fuzzer alike: make fuzz-replay-long FUZZ_RUNS=10000000
FUZZ_SECONDS ?= 600
FUZZ_RUNS ?= 0
# FUZZ_FORKS=2: that many worker processes (libFuzzer fork mode)
FUZZ_FORKS ?= 1
PYTHON ?= /usr/bin/python3
JOBS ?= $(shell nproc)
STEP_TIMES ?= $(BUILD)/make-test-steps
CMAKE_FLAGS ?=
# Warnings as errors: ON in make test (and so in CI), OFF by default. A build
# directory made without it is switched on when make test uses it.
WBKIT_WERROR ?= OFF
BUILD_RELEASE ?= build-release
# configure_build DIR FLAGS: configures DIR unless it is, and turns
# WBKIT_WERROR on in it when asked (never off: that would rebuild it all).
define configure_build
	@test -f $(1)/CMakeCache.txt || cmake -S . -B $(1) -DWBKIT_WERROR=$(WBKIT_WERROR) $(2)
	@[ "$(WBKIT_WERROR)" != ON ] || grep -q '^WBKIT_WERROR:[A-Z]*=ON$$' $(1)/CMakeCache.txt || \
		cmake -S . -B $(1) -DWBKIT_WERROR=ON >/dev/null
endef
# The formatter the style is tuned to (Debian 12's); other versions format differently.
CLANG_FORMAT ?= clang-format-14
# C++ sources under .clang-format. kmod/ and format/ keep the kernel's style.
CXX_SOURCES = $(shell find lib tools python/src tests bench -name '*.cpp' -o -name '*.hpp' -o -name '*.h' | sort)

.PHONY: all deps deps-build configure test-release-build demo deb test-deb-root test-initramfs test-boot-guard test-fstests check-format format check-kmod-style test test-unit test-asan test-tsan test-fuzz fuzz-configure fuzz-long fuzz-replay-long test-python test-vm test-vm-quick test-vm-debug test-kernels test-kernel-build test-stress test-stress-faults kdebug test-crash test-crash-quick test-powercut test-powercut-quick crash-peers bench-peers bench-kmem bench-full-log test-mutants test-mutants-quick bench kmod clean

all: configure
	cmake --build $(BUILD) -j $(JOBS)

deps-build:
	WBKIT_NO_VM=1 scripts/install-deps.sh

deps:
	scripts/install-deps.sh

configure: deps-build
	$(call configure_build,$(BUILD),-DPython3_EXECUTABLE=$(PYTHON) $(CMAKE_FLAGS))

# The main job on the bundled demo cache image.
demo: all
	scripts/demo.sh $(BUILD)

# The Debian packages (debian/): wbkit, python3-wbkit, dm-wbkit-dkms and the
# -dbgsym packages, built by dpkg-buildpackage -b from a copy of the tree's
# files (tracked, and untracked but not ignored) in $(DEB_DIR)/wbkit, so they
# land in $(DEB_DIR) and the tree stays clean; the source package (.dsc) too.
# Then lintian on all of them: an error or a warning fails.
DEB_DIR ?= $(BUILD)/deb
DEB_JOBS ?= 2
deb: deps-build
	rm -rf $(DEB_DIR)
	mkdir -p $(DEB_DIR)/wbkit
	git ls-files -z --cached --others --exclude-standard | \
		tar --null -T - --ignore-failed-read -cf - 2>/dev/null | tar -xf - -C $(DEB_DIR)/wbkit
	cd $(DEB_DIR) && dpkg-source -b wbkit
	cd $(DEB_DIR)/wbkit && DEB_BUILD_OPTIONS="parallel=$(DEB_JOBS) $(DEB_BUILD_OPTIONS)" \
		nice -n 15 dpkg-buildpackage -b -us -uc
	rm -rf $(DEB_DIR)/wbkit
	lintian --pedantic --fail-on error,warning $(DEB_DIR)/*.changes $(DEB_DIR)/*.dsc

# A clean Debian 12 root (debootstrap): install the packages with apt, use
# them, purge them, look for leftovers. Slow (a download of Debian 12's
# minimal system); not part of `make test`. See tests/packaging/clean-root.sh.
test-deb-root: deb
	tests/packaging/clean-root.sh $(DEB_DIR)

# Root on a writeboost device: an initramfs made by update-initramfs in a
# Debian 12 root with the hook of packaging/initramfs/ boots root=/dev/mapper/...
# in qemu, twice across a power cut, and a missing cache panics after a bounded
# wait. Root, about 4 minutes (9 the first time); not part of `make test`.
# See tests/initramfs/root-on-cache.sh.
test-initramfs: deps
	tests/initramfs/root-on-cache.sh

# The boot guard (packaging/boot/): a Debian 12 root booted with systemd in
# qemu mounts a writeboosttab device's file system by UUID= only through
# /dev/mapper/<name>, across a power cut, and a boot without the cache leaves
# the backing disk unmounted and ends in bounded time. Root, about 6 to 7
# minutes (5 boots of 45-135 s under TCG), 3 more the first time for the root, which
# is cached in /var/cache/wbkit/boot-guard-root; not part of `make test`.
# See tests/initramfs/boot-guard.sh.
test-boot-guard: deps
	tests/initramfs/boot-guard.sh

# fstests (xfstests), the file-system maintainers' suite, on dm-wbkit beside
# dm-linear (issue 58): a Debian 12 root with fstests built in it, cached in
# /var/cache/wbkit/fstests-root-<hash> (tests/fstests/build-root.sh), boots
# the VM tests' kernel once per configuration and runs tests/fstests/
# tests-short.list and tests.list (about 150 tests, hours a configuration;
# FSTESTS_LIST=tests/fstests/tests-short.list for its 13). Root; not part of
# `make test`. FSTESTS_CONFIGS="linear wbkit wbkit-small writecache",
# FSTESTS_FSTYP=xfs, FSTESTS_TESTS="generic/001 ..." to choose.
# See tests/fstests/README.md.
FSTESTS_TESTS ?=
test-fstests: deps kmod
	tests/fstests/run.sh $(FSTESTS_TESTS)

# Style first: it takes seconds and fails before the long part starts.
check-format: deps-build
	$(CLANG_FORMAT) --dry-run -Werror $(CXX_SOURCES)

# Rewrites the C++ sources to .clang-format.
format: deps-build
	$(CLANG_FORMAT) -i $(CXX_SOURCES)

# Everything: format, unit, CLI, Python, sanitizer (ASan/UBSan, TSan), fuzz and VM tests.
# Not the Debian packages: make deb took 9 to 16 minutes on the two shared
# cores (cli/test_packages checks them when build/deb holds them).
# WBKIT_REQUIRE_ALL_TESTS=1: a test that cannot run here (no loop devices,
# no device nodes, no strace) fails instead of skipping.
test: export WBKIT_REQUIRE_ALL_TESTS = 1
test: export WBKIT_WERROR = ON
test: export WBKIT_STEP_TIMES = $(abspath $(STEP_TIMES))
test: deps
	@rm -f $(STEP_TIMES)
	@MAKE="$(MAKE)" scripts/make-step.sh check-format
	@MAKE="$(MAKE)" scripts/make-step.sh check-kmod-style
	@MAKE="$(MAKE)" scripts/make-step.sh all
	@MAKE="$(MAKE)" scripts/make-step.sh test-unit
	@MAKE="$(MAKE)" scripts/make-step.sh test-release-build
	@MAKE="$(MAKE)" scripts/make-step.sh test-asan
	@MAKE="$(MAKE)" scripts/make-step.sh test-tsan
	@MAKE="$(MAKE)" scripts/make-step.sh test-fuzz
	@MAKE="$(MAKE)" scripts/make-step.sh test-mutants-quick
	@MAKE="$(MAKE)" scripts/make-step.sh test-kernel-build
	@MAKE="$(MAKE)" scripts/make-step.sh test-vm-quick
	@MAKE="$(MAKE)" scripts/make-step.sh test-crash-quick
	@MAKE="$(MAKE)" scripts/make-step.sh test-powercut-quick
	@echo "make test: every step passed; the times:"; cat $(STEP_TIMES)

# The three build types with warnings as errors: RelWithDebInfo (the main
# build), Debug (the ASan build) and Release, built here: at -O3 GCC warns
# where it does not at -O2. The library and the tools, what a Release
# package ships (about 2 minutes); RELEASE_TARGETS=all adds the tests.
RELEASE_TARGETS ?= wbkit wbdump wbreplay wbrecover wbstat wbctl
test-release-build: deps-build
	$(call configure_build,$(BUILD_RELEASE),-DCMAKE_BUILD_TYPE=Release -DWBKIT_PYTHON=OFF)
	cmake --build $(BUILD_RELEASE) -j $(JOBS) --target $(RELEASE_TARGETS)

test-unit: all
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-asan: deps-build
	$(call configure_build,$(BUILD_ASAN),-DWBKIT_SANITIZE=ON -DWBKIT_PYTHON=OFF -DCMAKE_BUILD_TYPE=Debug)
	cmake --build $(BUILD_ASAN) -j $(JOBS)
	cd $(BUILD_ASAN) && ctest --output-on-failure -j $(JOBS) -L unit

# The tests that run threads (the scan's parallel verification, the replay
# executor's reader thread, recovery, the index's parallel sort) under ThreadSanitizer.
TSAN_TESTS = test_log_scan test_log_verifier test_replay test_recover test_engine_corpus test_bucket_sort
test-tsan: deps-build
	$(call configure_build,$(BUILD_TSAN),-DWBKIT_TSAN=ON -DWBKIT_PYTHON=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo)
	cmake --build $(BUILD_TSAN) -j $(JOBS) --target $(TSAN_TESTS)
	set -e; for t in $(TSAN_TESTS); do TSAN_OPTIONS=halt_on_error=1 $(BUILD_TSAN)/tests/unit/$$t --gtest_brief=1; done

fuzz-configure: deps-build
	$(call configure_build,$(BUILD_FUZZ),-DWBKIT_FUZZ=ON -DWBKIT_PYTHON=OFF -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++)
	cmake --build $(BUILD_FUZZ) -j $(JOBS) --target fuzz_parsers fuzz_engine fuzz_replay

test-fuzz: fuzz-configure
	tests/fuzz/run.sh $(BUILD_FUZZ)

# The long run fuzzes without ASan (about ten times the rate), then runs every
# input it found again under ASan.
fuzz-long: fuzz-configure
	@test -f $(BUILD_FUZZ_FAST)/CMakeCache.txt || cmake -S . -B $(BUILD_FUZZ_FAST) -DWBKIT_FUZZ=ON -DWBKIT_FUZZ_ASAN=OFF -DWBKIT_PYTHON=OFF -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++
	cmake --build $(BUILD_FUZZ_FAST) -j $(JOBS) --target fuzz_engine
	FUZZ_FORKS=$(FUZZ_FORKS) tests/fuzz/long.sh $(BUILD_FUZZ_FAST) $(FUZZ_SECONDS) $(FUZZ_RUNS) $(BUILD_FUZZ)

# The same for the replay decision's fuzzer (format/wbkit_format.h against
# its model); the grown corpus is left in $(BUILD_FUZZ_FAST)/fuzz-long-corpus-replay.
fuzz-replay-long: fuzz-configure
	@test -f $(BUILD_FUZZ_FAST)/CMakeCache.txt || cmake -S . -B $(BUILD_FUZZ_FAST) -DWBKIT_FUZZ=ON -DWBKIT_FUZZ_ASAN=OFF -DWBKIT_PYTHON=OFF -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++
	cmake --build $(BUILD_FUZZ_FAST) -j $(JOBS) --target fuzz_replay
	FUZZ_TARGET=fuzz_replay FUZZ_FORKS=$(FUZZ_FORKS) tests/fuzz/long.sh $(BUILD_FUZZ_FAST) $(FUZZ_SECONDS) $(FUZZ_RUNS) $(BUILD_FUZZ)

# Every scenario (a skip not in tests/vm/skips-allowed fails), then the
# harness's own checks: a kernel warning fails a run even when the guest
# erased its log (selftest-canary), a hang leaves its evidence (selftest-watchdog).
test-vm: deps all
	WBKIT_VM_REQUIRED=1 tests/vm/run-all.sh $(BUILD)
	bash tests/vm/selftest-canary.sh
	bash tests/vm/selftest-watchdog.sh

# make test's part of it: every scenario but the long ones that
# tests/vm/long-scenarios lists with their reasons (about 22 of the
# suite's 36 minutes). The harness's self-tests (2.5 minutes) check the
# harness, not the module: make test-vm runs them, and a change to
# tests/vm/lib.sh or guest-lib.sh wants that run.
test-vm-quick: deps all
	WBKIT_VM_REQUIRED=1 WBKIT_VM_QUICK=1 tests/vm/run-all.sh $(BUILD)

# The sanitizer kernel (KASAN, UBSAN, lockdep, DEBUG_ATOMIC_SLEEP, hung-task
# detection) for the VM tests: built once per machine into
# /var/cache/wbkit/kdebug-<version>-<hash> (scripts/build-kdebug.sh), then reused.
kdebug: deps
	scripts/build-kdebug.sh

# Every VM scenario on that kernel; a KASAN, UBSAN, lockdep, WARNING, BUG or
# hung-task report in a guest's log fails its scenario. Long (tests/vm/README.md):
# not part of `make test`; run it after every change to kmod/.
# make test-vm-debug VM_SCENARIOS="00-upstream-smoke 10-wbkit-integrity" runs those only.
VM_SCENARIOS ?=
test-vm-debug: deps all kmod kdebug
	scripts/test-vm-debug.sh $(BUILD) $(VM_SCENARIOS)

# The VM suite on every kernel Debian ships (issue 37): bookworm's own (the
# host's, 6.1), bookworm-backports' 6.12, and the newest of trixie-backports
# and sid, each from a debootstrap chroot cached in /var/cache/wbkit/chroots
# (scripts/kernel-chroot.sh; the host's kernel packages stay as they are).
# dm-wbkit and upstream's module of the same suite are built there with the
# suite's compiler; upstream's parts run where it builds. About 35 minutes a
# kernel: run it before a release and when a new kernel reaches sid or
# backports. One summary line a kernel (BUILD/<kernel>/summary) for
# kmod/README.md's table. KERNELS="sid" or VM_SCENARIOS="..." for fewer.
KERNELS ?= bookworm bookworm-backports trixie-backports sid
test-kernels: deps all kmod
	@fail=0; for k in $(KERNELS); do scripts/test-vm-kernel.sh $(BUILD) $$k $(VM_SCENARIOS) || fail=1; done; \
		echo "test-kernels:"; for k in $(KERNELS); do cat $(BUILD)/$$k/summary 2>/dev/null || echo "$$k: no summary"; done; \
		exit $$fail

# make test's part of it: dm-wbkit builds, without a VM, against the newest
# kernel headers Debian has (sid's and trixie-backports'), so a kernel API
# change fails CI the day it reaches Debian.
test-kernel-build: deps
	scripts/kernel-build-check.sh $(BUILD)

# The option-grid stress scenario, every row over three seeds, upstream first
# (make test runs three rows of one seed). STRESS_SEEDS="4 5" for others.
STRESS_SEEDS ?= 1 2 3
test-stress: deps all
	WBKIT_STRESS_SEEDS="$(STRESS_SEEDS)" WBKIT_STRESS_ROWS=all WBKIT_STRESS_OPS=1500 \
		bash tests/vm/scenarios/90-stress-grid.sh

# The same with faults: a backing region whose reads fail (read meanwhile),
# the cache device behind dm-delay (90-stress-grid.sh, WBKIT_STRESS_FAULTS).
test-stress-faults: deps all
	WBKIT_STRESS_FAULTS=1 WBKIT_STRESS_SEEDS="$(STRESS_SEEDS)" WBKIT_STRESS_ROWS=all WBKIT_STRESS_OPS=1500 \
		bash tests/vm/scenarios/90-stress-grid.sh

# Crash consistency over every crash state of recorded write logs (VM recordings,
# offline, in-kernel and upstream checks; tests/crash/run.sh). Long: not part of
# `make test`, which runs the bounded subset (ctest crash_smoke).
test-crash: deps all kmod
	tests/crash/run.sh $(BUILD)

# A power cut on the module under test: two short dm-log-writes recordings,
# every crash state checked offline, a sample by the kernel (about 2 minutes).
test-crash-quick: deps all kmod
	tests/crash/quick.sh $(BUILD)

# Power cuts with a volatile write cache per disk (tests/crash/powercut.sh):
# each guest disk behind its own nbdkit cache filter, which keeps a disk's
# writes until the guest flushes that disk, all three processes killed at a
# random moment, every acknowledged write checked after the kernel's replay
# and after wbreplay's, discards among the writes (5 %; not in make test's
# quick run until the wb_ht_del WARNING one full run with discards showed,
# tests/crash/README.md, is understood). make test runs the quick one (dm-wbkit, 6 cuts
# taking turns between the workload, wbctl detach and wbreplay --mark-clean;
# about 2 minutes); test-powercut the full one (upstream first, then
# dm-wbkit: 12 cuts of the workload, 6 of detach, 6 of mark-clean each;
# about 13 minutes on an idle machine).
test-powercut-quick: deps all kmod
	POWERCUT_DISCARD_PCT=0 tests/crash/powercut.sh $(BUILD)

test-powercut: deps all kmod
	POWERCUT_FULL=1 tests/crash/powercut.sh $(BUILD)

# Durability after a power cut of the kernel's own caches (dm-writecache,
# bcache, dm-cache) and the writeboost targets, the same recorded workload,
# sampled crash states built on in the kernel (tests/crash/peers.sh; about
# 15 minutes). A measurement: a peer losing writes is reported, dm-wbkit
# losing one fails. Not part of `make test`.
CRASH_PEERS_STATES ?= 100
crash-peers: deps configure
	cmake --build $(BUILD) -j $(JOBS) --target wbcrash
	CRASH_PEERS_STATES=$(CRASH_PEERS_STATES) tests/crash/peers.sh $(BUILD)

# The mutant gate (tests/mutants/run.sh): patches that each make one known
# mistake in kmod/, lib/ or the replay decision; each must fail one of its
# tests. make test runs the gate itself for the mutants its fuzzer catches
# (seconds) and for the two of flush ordering across the two devices (a
# recording each, caught by the two-flush-domain crash states: about 75 s
# each); every mutant with its VM scenarios and recordings takes about
# half an hour. MUTANTS="name ..." runs those.
MUTANTS ?=
MUTANTS_IN_TEST = every-bad-checksum-a-torn-rewrite torn-rewrite-rule-on-own-logs \
	no-backing-flush-before-written-back backing-flush-sent-to-cache
test-mutants: deps all kmod
	tests/mutants/run.sh $(BUILD) $(MUTANTS)

# Every mutant must still apply (a change to the code under one breaks it
# silently until the half-hour gate runs): checked here, in seconds.
test-mutants-quick: deps all
	@set -e; for m in tests/mutants/*.mutant; do \
		patch -s -f -p1 --dry-run <$$m >/dev/null || { echo "$$m no longer applies: update it"; exit 1; }; \
	done
	tests/mutants/run.sh $(BUILD) $(MUTANTS_IN_TEST)

bench: all
	bench/run.sh $(BUILD)

# dm-wbkit against dm-writecache, bcache and dm-cache over the hard-disk
# model, one VM boot (bench/vm-peers.sh; hours at the defaults; the header
# gives a short validation run). Not part of `make test`.
bench-peers: deps all kmod
	bench/vm-peers.sh $(BUILD)

# Kernel memory of every cache at 1 and 64 GiB (bench/vm-kmem.sh), and the
# construction of a full 64 GiB log beside the time to read its headers
# (bench/vm-full-log.sh). Minutes each; not part of `make test`.
bench-kmem: deps all kmod
	bench/vm-kmem.sh $(BUILD)

bench-full-log: deps all kmod
	bench/vm-full-log.sh $(BUILD)

kmod: deps
	$(MAKE) -C kmod

# The kernel's checkpatch.pl on kmod/ (extracted from linux-source-6.1 into $(BUILD)/checkpatch),
# then the module's file-level call graph, which must have no cycle (builds kmod/).
check-kmod-style:
	scripts/check-kmod-style.sh $(BUILD)/checkpatch
	scripts/check-kmod-calls.sh

clean:
	rm -rf $(BUILD) $(BUILD_ASAN) $(BUILD_TSAN) $(BUILD_FUZZ) $(BUILD_FUZZ_FAST) $(BUILD_RELEASE)
	-$(MAKE) -C kmod clean
