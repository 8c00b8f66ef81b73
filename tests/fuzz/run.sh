#!/usr/bin/env bash
# Runs each libFuzzer harness of a fuzz build (tests/fuzz/README.md) for
# FUZZ_TIME seconds (default 60), from its seed corpus in
# tests/fuzz/corpus/<name> plus what earlier runs found (kept in
# <build>/fuzz-corpus/<name>, never in the tree).  A crash, a leak, a
# sanitizer report or a failed oracle stops the run: the input is saved as
# <build>/fuzz-artifacts/<name>/crash-*, and the script exits 1 after the
# other harnesses ran.
#   tests/fuzz/run.sh BUILD [NAME...]
set -uo pipefail
build=${1:?usage: tests/fuzz/run.sh BUILD [NAME...]}
shift
here=$(cd "$(dirname "$0")" && pwd)
time=${FUZZ_TIME:-60}
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
	for exe in "$build"/tests/fuzz/fuzz_*; do
		[ -x "$exe" ] && [ -f "$exe" ] && names+=("$(basename "$exe")")
	done
fi
[ ${#names[@]} -gt 0 ] || { echo "fuzz: no harness in $build/tests/fuzz (meson setup with -Dfuzz=true)" >&2; exit 1; }
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
failed=()
for name in "${names[@]}"; do
	exe=$build/tests/fuzz/$name
	seeds=$here/corpus/$name
	work=$build/fuzz-corpus/$name
	art=$build/fuzz-artifacts/$name
	mkdir -p "$work" "$art"
	[ -d "$seeds" ] || { echo "fuzz: $name has no seed corpus $seeds" >&2; failed+=("$name"); continue; }
	log=$build/fuzz-artifacts/$name.log
	echo "fuzz: $name for ${time}s"
	if "$exe" -max_total_time="$time" -timeout=10 -rss_limit_mb=2048 \
		-max_len=8192 -print_final_stats=1 -artifact_prefix="$art/" \
		"$work" "$seeds" >"$log" 2>&1; then
		grep -E '^stat::number_of_executed_units' "$log" | sed "s/^/fuzz: $name /"
	else
		echo "fuzz: $name FAILED (log $log, inputs $art):" >&2
		grep -a -E 'fuzz check failed|runtime error|ERROR: [A-Za-z]+Sanitizer|SUMMARY|ERROR: libFuzzer|Test unit written' "$log" | head -20 >&2
		failed+=("$name")
	fi
done
if [ ${#failed[@]} -gt 0 ]; then
	echo "fuzz: ${#failed[@]} failed: ${failed[*]}" >&2
	exit 1
fi
echo "fuzz: ${#names[@]} harnesses ran ${time}s each, nothing found"
