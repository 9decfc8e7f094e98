# SPDX-License-Identifier: GPL-2.0
#
# sdp top-level build: Kbuild for sdp.ko, CMake/Ninja for everything in
# userspace.  `make help` lists the targets.
#
# Variables:
#   KVER          kernel to build the module for and boot in the VM
#                 (default: the newest installed Debian kernel with headers)
#   VM_KVERS      kernels `make check` tests in the VM (default: KVER if set,
#                 else every installed kernel)
#   BUILD         output directory (default: build)
#   FUZZ_SECONDS  length of `make fuzz` (the smoke run in `make check` is 20 s)
#   DEBUG_TIMEOUT guest time limit of `make check-debug`, seconds
#   CONFORMANCE   `share` (default): vm-check runs each pass of the
#                 conformance suite but the first in one kernel's guest;
#                 `all`: every pass in every guest
#   PREFIX        `make install`: where the tools, library, header and man
#                 pages go (default /usr/local); the module goes to
#                 /lib/modules/KVER/updates, the rules file to /etc
#   DESTDIR       `make install`: a staging root (no depmod then)

SHELL := /bin/bash
TOP := $(abspath .)
BUILD ?= $(TOP)/build
HOST_BUILD := $(BUILD)/host
# `make install` builds the tools without sanitizers, here.
RELEASE_BUILD := $(BUILD)/release
PREFIX ?= /usr/local
DESTDIR ?=
FUZZ_SECONDS ?= 300
CONFORMANCE ?= share
# Evaluated in recipes, after `deps` may have installed the kernels.
KVER ?=
VM_KVERS ?=
kver = $${KVER:-$$(scripts/kver.sh)}
vm_kvers = $${VM_KVERS:-$${KVER:-$$(scripts/kver.sh --all)}}

export SDP_BUILD := $(BUILD)
export KVER VM_KVERS

.PHONY: all help deps userspace module modules unit vm-check pair-check check fuzz \
	format format-check tidy sparse checkpatch clean bench demo debug-kernel check-debug \
	pair-check-debug install install-module install-userspace install-dkms uninstall \
	install-check deb deb-root

all: userspace module

help:
	@echo "make              build userspace (build/host) and sdp.ko for KVER"
	@echo "make deps         install missing Debian packages (needs root)"
	@echo "make check        host unit tests, fuzz smoke run, VM tests on every kernel"
	@echo "make unit         host unit tests and fuzz smoke run only"
	@echo "make vm-check     VM tier(s) only (KVER or VM_KVERS)"
	@echo "make pair-check   two-guest tier(s) only: a real link, capture + wire check,"
	@echo "                  integrity, netem impairments, faults (KVER or VM_KVERS)"
	@echo "make deb-root     dpkg -i and dpkg -r of build/deb in a copy of the root (DKMS"
	@echo "                  for every kernel); the guests' package test uses the result"
	@echo "make check-debug  the VM tier on a KASAN + lockdep + kmemleak 6.1 kernel"
	@echo "                  (built once, about an hour; not part of make check)"
	@echo "make pair-check-debug  the two-guest tier on that kernel"
	@echo "make module       sdp.ko for KVER;  make modules: for every kernel"
	@echo "make install      sdp.ko for KVER into /lib/modules, tools, libsdp.so, header,"
	@echo "                  man pages into PREFIX (/usr/local); DESTDIR; make uninstall"
	@echo "make install-dkms sdp.ko's source into /usr/src for DKMS, dkms install"
	@echo "make deb          Debian packages in build/deb: sdp-dkms, sdp-tools, libsdp(-dev)"
	@echo "make fuzz         long fuzz run (FUZZ_SECONDS)"
	@echo "make format | format-check | tidy | sparse | checkpatch"
	@echo "make bench        SDP against raw verbs, rsockets and TCP in the VM (KVER):"
	@echo "                  results in build/bench; BENCH_SIZES, BENCH_ZCOPY_SIZES,"
	@echo "                  BENCH_DURATION, BENCH_ROUNDS, BENCH_CONNS"
	@echo "make demo         boot the VM, move data over AF_INET_SDP on Soft-RoCE, summarise"

deps:
	@scripts/install-deps.sh --check >/dev/null 2>&1 || scripts/install-deps.sh

$(HOST_BUILD)/build.ninja: CMakeLists.txt userlib/CMakeLists.txt | deps
	cmake -S $(TOP) -B $(HOST_BUILD) -G Ninja \
		-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
		-DCMAKE_BUILD_TYPE=RelWithDebInfo

userspace: deps $(HOST_BUILD)/build.ninja
	ninja -C $(HOST_BUILD)

# sparse runs on the C glue of every module build (C=1), warnings are errors.
# scripts/build-module.sh builds the kernel-consumer test module (tests/kmod)
# with sdp.ko.
module: deps
	scripts/build-module.sh "$(kver)" C=1 CHECK="sparse -Wsparse-error"

modules: deps
	@set -e; for k in $(vm_kvers); do \
		scripts/build-module.sh "$$k" C=1 CHECK="sparse -Wsparse-error"; \
	done

sparse: deps
	scripts/build-module.sh "$(kver)" C=2 CHECK="sparse -Wsparse-error"

unit: userspace
	cd $(HOST_BUILD) && ctest --output-on-failure --timeout 300

# One boot per kernel runs the whole VM tier; every kernel is tried even when
# one fails, and the target fails if any did.  Each guest also checks the
# Debian packages, installed on the host into a copy of its root (deb-root).
# The limit is a watchdog for a hung guest, not a time goal.
vm-check: userspace modules deb-root
	@scripts/vm/each-kernel.sh vm-check "$(vm_kvers)" $(BUILD)/vm/logs \
		env $(if $(filter all,$(CONFORMANCE)),,SDP_VM_GUEST_ENV=SDP_CONFORMANCE_SHARE=@I/@N) \
		scripts/vm/run.sh -k @K -m 2048 -o $(BUILD)/vm/results/@K -t 2400 \
		tests/vm/tier-socket.sh $(BUILD)

# Two guests joined by a qemu link (scripts/vm/run-pair.sh): one boot pair
# per kernel runs tests/vm/tier-pair.sh; -w decodes the capture (tshark).
pair-check: userspace modules
	@scripts/vm/each-kernel.sh pair-check "$(vm_kvers)" $(BUILD)/vm/logs \
		scripts/vm/run-pair.sh -w -k @K -o $(BUILD)/vm/pair/@K -t 1500 \
		tests/vm/tier-pair.sh $(BUILD)

check: unit checkpatch install-check vm-check pair-check
	@echo "check: all tiers passed"

# --- install ---------------------------------------------------------------
install: install-module install-userspace

# sdp.ko into /lib/modules/KVER/updates; depmod records its dependencies
# (ib_core, rdma_cm) and aliases, so `modprobe sdp` and socket() autoload
# work.  With DESTDIR, depmod is left to the package's postinst.
install-module: module
	@set -e; kver=$(kver); \
	install -D -m 0644 $(BUILD)/kmod/$$kver/sdp.ko $(DESTDIR)/lib/modules/$$kver/updates/sdp.ko; \
	if [ -z "$(DESTDIR)" ]; then depmod -a $$kver; fi; \
	echo "install: sdp.ko in $(DESTDIR)/lib/modules/$$kver/updates"

install-userspace: deps
	@mkdir -p $(BUILD); cmake -S $(TOP) -B $(RELEASE_BUILD) -G Ninja \
		-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
		-DCMAKE_BUILD_TYPE=RelWithDebInfo -DSDP_SANITIZE=OFF -DSDP_FUZZ=OFF \
		-DCMAKE_INSTALL_PREFIX=$(PREFIX) > $(BUILD)/release-configure.log
	cmake --build $(RELEASE_BUILD) --target sdp-decode sdp-bench sdpstat sdp_preload
	DESTDIR=$(DESTDIR) cmake --install $(RELEASE_BUILD)

# The DKMS source tree into /usr/src/sdp-VERSION, then dkms add, build and
# install for the running kernel (with DESTDIR: the tree only).
install-dkms:
	@set -e; src=$$(scripts/dkms-source.sh $(DESTDIR)/usr/src); \
	echo "install-dkms: $$src"; \
	if [ -z "$(DESTDIR)" ]; then \
		v=$${src##*/sdp-}; dkms add -m sdp -v $$v && dkms install -m sdp -v $$v; \
	fi

# What the last `make install` installed (install_manifest.txt), except an
# /etc/libsdp.conf: it is the administrator's.
uninstall:
	@set -e; kver=$(kver); \
	rm -f $(DESTDIR)/lib/modules/$$kver/updates/sdp.ko; \
	if [ -z "$(DESTDIR)" ]; then depmod -a $$kver; fi; \
	if [ -f $(RELEASE_BUILD)/install_manifest.txt ]; then \
		sed -e '$$a\' $(RELEASE_BUILD)/install_manifest.txt | \
			grep -v '^/etc/libsdp.conf$$' | sed 's|^|$(DESTDIR)|' | \
			xargs -r -d '\n' rm -f; \
	fi; \
	echo "uninstall: done"

# The Debian packages, in $(BUILD)/deb (scripts/build-debs.sh).
deb: deps
	@scripts/build-debs.sh $(BUILD)/deb

# dpkg -i of those packages into a copy of this machine's root, which the
# guests boot, as into a chroot: DKMS builds sdp.ko for every kernel with
# headers, natively (scripts/deb-root.sh); tests/vm/deb_test.sh in each
# guest applies the result, loads the module and uses the installed tools.
deb-root: deb
	@scripts/deb-root.sh $(BUILD)

# make install into a staging root, then use what it installed: modinfo of
# the module, sdp_run finding libsdp.so, a program built with pkg-config
# and one with find_package(sdp), the man pages; then make uninstall.
install-check: userspace module
	@tests/scripts/install_test.sh "$(kver)"

# --- the debug kernel: KASAN, lockdep, kmemleak, debug objects ---------------
# scripts/debug-kernel.sh builds it once from Debian's linux-source-6.1
# (cached under /var/cache/sdp-debug-kernel) and installs it as
# 6.1.N-sdpdebug; scripts/kver.sh leaves it out of `make check`.  The whole
# VM tier runs on it, then a kmemleak scan (tests/vm/tier-debug.sh); any
# KASAN, lockdep, debug-objects or kmemleak report fails the run.  TCG with
# KASAN and lockdep is several times slower than the Debian kernels: more
# memory (KASAN's shadow, its quarantine), a longer hung-task threshold.
# kasan_multi_shot: every KASAN report, not only the first.  no5lvl: qemu's
# "max" CPU has LA57, and 6.1 identifies the boot CPU with interrupts on
# (arch_cpu_finalize_init()): an interrupt while identify_cpu() has cleared
# the capability bits sees pgtable_l5_enabled() false, KASAN's shadow
# bounds for 4-level paging, and reports every access to the 5-level
# direct map as wild (seen once in five boots, a flood of reports).
DEBUG_TIMEOUT ?= 9000
DEBUG_VM_APPEND ?= sysctl.kernel.hung_task_timeout_secs=120 kasan_multi_shot no5lvl

debug-kernel:
	scripts/debug-kernel.sh

check-debug: userspace debug-kernel deb-root
	@set -e; kver=$$(scripts/debug-kernel.sh --release); \
	scripts/build-module.sh "$$kver" C=1 CHECK="sparse -Wsparse-error"; \
	start=$$(date +%s); \
	SDP_VM_APPEND="$(DEBUG_VM_APPEND)" scripts/vm/run.sh -k "$$kver" -m 2048 \
		-o $(BUILD)/vm/results/$$kver -t $(DEBUG_TIMEOUT) \
		tests/vm/tier-debug.sh $(BUILD); \
	echo "check-debug: passed on $$kver in $$(( $$(date +%s) - start ))s"

# The two-guest tier (pair-check) on the debug kernel: conformance across the
# link, integrity, netem and the faults, both guests with KASAN and lockdep,
# and a kmemleak check on guest a, which outlives the faults (tests/vm/
# tier-pair.sh).  Smaller transfers
# than pair-check's: the checkers make every byte several times slower.
PAIR_DEBUG_ENV ?= PAIR_INTEGRITY_BYTES=16M PAIR_NETEM_BYTES=1M \
	PAIR_CONFORMANCE_ARGS="--timeout 900"

pair-check-debug: userspace debug-kernel
	@set -e; kver=$$(scripts/debug-kernel.sh --release); \
	scripts/build-module.sh "$$kver" C=1 CHECK="sparse -Wsparse-error"; \
	start=$$(date +%s); \
	$(PAIR_DEBUG_ENV) SDP_VM_APPEND="$(DEBUG_VM_APPEND)" \
		scripts/vm/run-pair.sh -w -k "$$kver" -m 2048 -o $(BUILD)/vm/pair/$$kver \
		-t $(DEBUG_TIMEOUT) tests/vm/tier-pair.sh $(BUILD); \
	echo "pair-check-debug: passed on $$kver in $$(( $$(date +%s) - start ))s"

fuzz: userspace
	scripts/fuzz-smoke.sh $(HOST_BUILD)/fuzz_wire_decode \
		tests/fuzz/corpus/wire_decode $(BUILD)/fuzz-artifacts $(FUZZ_SECONDS)
	scripts/fuzz-smoke.sh $(HOST_BUILD)/fuzz_conn \
		tests/fuzz/corpus/conn $(BUILD)/fuzz-artifacts $(FUZZ_SECONDS)

CXX_SOURCES = $(shell git ls-files 'kernel/core/*.cpp' 'kernel/core/*.h' ':!kernel/core/sdp_core.h' \
	'tests/*.cpp' 'tests/*.h' 'userlib/*.cpp' 'userlib/*.h' ':!userlib/preload/*.h')

format:
	clang-format -i $(CXX_SOURCES)

# checkpatch.pl on the kernel C (scripts/checkpatch.sh): no error, no warning.
checkpatch:
	@scripts/checkpatch.sh

format-check:
	clang-format --dry-run --Werror $(CXX_SOURCES)

tidy: userspace
	clang-tidy -p $(HOST_BUILD) --quiet $(filter %.cpp,$(CXX_SOURCES))

clean:
	rm -rf $(BUILD)

# --- benchmark and demo: one boot of KVER each ------------------------------
BENCH_SIZES ?= 64,1024,16384,65536,262144
BENCH_ZCOPY_SIZES ?= 65536,262144,1048576,4194304
BENCH_DURATION ?= 2
BENCH_ROUNDS ?= 3
BENCH_CONNS ?= 200

# The guest measures raw verbs (perftest), rsockets (rstream), TCP and SDP
# (sdp-bench) on one Soft-RoCE link; the host then writes
# $(BUILD)/bench/results.csv, the table with the SDP goals and the plots.
# SDP not working yet or a ratio short of its goal never fails the target;
# a broken test bed, reference tool or kernel report does.
bench: userspace module
	@rc=0; scripts/vm/run.sh -k "$(kver)" -o $(BUILD)/bench/vm -t 900 \
		tests/vm/bench.sh $(BUILD) --sizes $(BENCH_SIZES) \
		--zcopy-sizes $(BENCH_ZCOPY_SIZES) \
		--duration $(BENCH_DURATION) --rounds $(BENCH_ROUNDS) \
		--conns $(BENCH_CONNS) || rc=1; \
	cat /proc/loadavg > $(BUILD)/bench/vm/host-loadavg 2>/dev/null; \
	scripts/bench/report.py $(BUILD)/bench/vm $(BUILD)/bench || rc=1; \
	exit $$rc

demo: userspace module
	scripts/vm/run.sh -k "$(kver)" -o $(BUILD)/demo -t 240 tests/vm/demo.sh $(BUILD)
