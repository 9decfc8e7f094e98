#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Bounded libFuzzer run for `make check` / ctest.
#
#   fuzz-smoke.sh FUZZER CORPUS_DIR ARTIFACT_DIR SECONDS
#
# Fuzzes for SECONDS over a copy of CORPUS_DIR: libFuzzer adds the inputs it
# finds interesting to the corpus directory it is given, and the source corpus
# is a reviewed, committed set of seeds that a test run must not change.
# Crash reproducers go to ARTIFACT_DIR.  Exits non-zero if the fuzzer found a
# crash (or failed to run); prints a one-line summary otherwise.
set -euo pipefail

usage() {
	echo "usage: $0 FUZZER CORPUS_DIR ARTIFACT_DIR SECONDS" >&2
	exit 2
}

[[ $# -eq 4 ]] || usage
fuzzer=$1
corpus=$2
artifacts=$3
seconds=$4

[[ -x $fuzzer ]] || { echo "fuzz-smoke: $fuzzer is not an executable" >&2; exit 2; }
[[ -d $corpus ]] || { echo "fuzz-smoke: $corpus is not a directory" >&2; exit 2; }
[[ $seconds =~ ^[1-9][0-9]*$ ]] || { echo "fuzz-smoke: SECONDS must be a positive integer" >&2; exit 2; }

mkdir -p "$artifacts"
work=$(mktemp -d "${TMPDIR:-/tmp}/fuzz-smoke.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir "$work/corpus"
cp -R "$corpus/." "$work/corpus/"
seeds=$(find "$work/corpus" -type f | wc -l)

log=$work/fuzz.log
rc=0
"$fuzzer" -max_total_time="$seconds" -artifact_prefix="${artifacts%/}/" \
	-print_final_stats=1 "$work/corpus" >"$log" 2>&1 || rc=$?

name=$(basename "$fuzzer")
if [[ $rc -ne 0 ]]; then
	# Enough of the log for ctest --output-on-failure to show the crash.
	tail -n 60 "$log" >&2
	echo "fuzz-smoke: $name FAILED (exit $rc); reproducers in $artifacts" >&2
	exit "$rc"
fi

execs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | tail -n 1)
if [[ -z $execs ]]; then
	tail -n 20 "$log" >&2
	echo "fuzz-smoke: $name printed no final stats; is it a libFuzzer binary?" >&2
	exit 1
fi
final=$(find "$work/corpus" -type f | wc -l)
echo "fuzz-smoke: $name ok: $execs executions in ${seconds}s, corpus $seeds -> $final inputs"
