#!/usr/bin/env bash
# run.sh BUILD_DIR — runs every test: the cmocka unit tests of BUILD_DIR,
# then each tests/integration/t_*.sh against a throwaway PostgreSQL
# cluster started here.  Ends with the line "N passed, N failed".
#   tests/run.sh build-asan              all tests
#   tests/run.sh build-asan t_rollback   integration tests matching a pattern
#   tests/run.sh build-asan t_a t_b      ... matching any of the patterns
# T_JOBS=N runs the integration tests in N lanes at once (default 2),
# each with a cluster of its own; tests marked "# serial" run alone after.
# T_KEEP=1 keeps each test's directory (in T_ROOT when set, else a new
# /tmp/pgoutbox-test.*); PGO_BIN_WRAP runs the tests' pgoutbox through
# another program (tests/valgrind.sh: valgrind).
# tests/soak/t_*.sh run only when a PATTERN names them (make chaos-kafka):
# soaks and known-failing checks kept out of the default run, see
# tests/soak/README.md.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:?usage: tests/run.sh BUILD_DIR [PATTERN...]}
shift
PATTERNS=("$@")
PATTERN=${PATTERNS[*]}
ROOT=$(pwd)
export PGO_BIN=$ROOT/$BUILD/pgoutbox
[ -x "$PGO_BIN" ] || { echo "run.sh: $PGO_BIN not built" >&2; exit 2; }
[ -z "${PGO_BIN_WRAP:-}" ] || PGO_BIN=$PGO_BIN_WRAP
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:exitcode=86}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1:exitcode=87}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$ROOT/tests/lsan.supp:print_suppressions=0}

passed=0
failed=0
failures=()

if [ -n "${T_ROOT:-}" ]; then
	TMP=$T_ROOT
	mkdir -p "$TMP"
else
	TMP=$(mktemp -d /tmp/pgoutbox-test.XXXXXX)
fi
chmod 755 "$TMP"
. scripts/pg.sh
# The cluster is the run's own: a PG_PORT or PG_DIR in the environment (the
# user's, or an outer run's) must not choose it.
unset PG_DIR PG_PORT PG_BIN PG_URL PG_OPTS
cleanup() {
	local d
	pg_stop
	# The lanes' clusters, when the run was cut short.
	for d in "$TMP"/pg*/data; do
		[ -f "$d/postmaster.pid" ] && pg_as "$(pg_bindir)/pg_ctl" -D "$d" -m immediate -w stop >/dev/null 2>&1
	done
	[ -n "${T_KEEP:-}" ] || rm -rf "$TMP"
}
trap cleanup EXIT

if [ -z "$PATTERN" ]; then
	echo "== unit tests"
	for t in "$BUILD"/tests/test_*; do
		[ -f "$t" ] && [ -x "$t" ] || continue
		out=$("$t" 2>&1); rc=$?
		p=$(grep -o '\[  PASSED  \] [0-9]* test' <<<"$out" | grep -o '[0-9]*' || true)
		f=$(grep -o '\[  FAILED  \] [0-9]* test' <<<"$out" | grep -o '[0-9]*' || true)
		p=${p:-0}; f=${f:-0}
		if [ "$rc" != 0 ] && [ "$f" = 0 ]; then f=1; fi
		passed=$((passed + p)); failed=$((failed + f))
		printf '  %-28s %s passed, %s failed\n' "$(basename "$t")" "$p" "$f"
		if [ "$f" != 0 ]; then
			failures+=("$(basename "$t")")
			echo "$out" | grep -v '^\[ \(RUN\|       OK\) ' | tail -n 40
		fi
	done
fi

unit_passed=$passed
unit_failed=$failed

# The integration tests, in T_JOBS lanes at once (default 2; 1 runs them
# one by one), each lane with a PostgreSQL cluster of its own; a test
# whose header has a line "# serial" (timing-sensitive, or one that loads
# the whole machine) runs after them, alone.  Each test's report is
# printed whole as it ends.
tests=()
serial=()
soaks=()
[ -n "$PATTERN" ] && soaks=(tests/soak/t_*.sh)
for t in tests/integration/t_*.sh "${soaks[@]}"; do
	[ -f "$t" ] || continue
	name=$(basename "$t" .sh)
	if [ -n "$PATTERN" ]; then
		match=
		for p in "${PATTERNS[@]}"; do
			[[ "$name" == *$p* ]] && match=1
		done
		[ -n "$match" ] || continue
	fi
	if grep -qE '^# serial(:|$)' "$t"; then serial+=("$t"); else tests+=("$t"); fi
done
JOBS=${T_JOBS:-2}
[[ "$JOBS" =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: T_JOBS must be a number of lanes, not \"$JOBS\"" >&2; exit 2; }
[ "${#tests[@]}" -lt "$JOBS" ] && JOBS=$(( ${#tests[@]} > 0 ? ${#tests[@]} : 1 ))
mkdir -p "$TMP/.lanes"
printf '%s\n' "${tests[@]}" >"$TMP/.lanes/queue"
: >"$TMP/.lanes/next"
: >"$TMP/.lanes/results"

# run_test FILE: runs one test, prints its report (under the print lock),
# records "ok NAME" or "fail NAME".
run_test() {
	local t=$1 name rc start report
	name=$(basename "$t" .sh)
	export T_TMP="$TMP/$name"
	mkdir -p "$T_TMP"; chmod 777 "$T_TMP"
	start=$SECONDS
	timeout -k 10 300 bash "$t" >"$T_TMP/output" 2>&1; rc=$?
	report="$T_TMP/.report"
	{
		if [ "$rc" = 0 ]; then
			printf '  ok   %-34s %3ds\n' "$name" $((SECONDS - start))
		else
			printf '  FAIL %-34s %3ds (exit %s)\n' "$name" $((SECONDS - start)) "$rc"
			sed 's/^/       | /' "$T_TMP/output" | tail -n 60
			for log in "$T_TMP"/*.log; do
				[ -f "$log" ] || continue
				echo "       -- $(basename "$log") (last lines)"
				tail -n 15 "$log" | sed 's/^/       | /'
			done
		fi
		grep -h '^  ' "$T_TMP/output" | sed 's/^/       /' || true
	} >"$report"
	(
		flock 9
		cat "$report"
		if [ "$rc" = 0 ]; then echo "ok $name"; else echo "fail $name"; fi >>"$TMP/.lanes/results"
	) 9>"$TMP/.lanes/print.lock"
}

# lane K: its own cluster; takes the next test off the queue until none.
lane() {
	local k=$1 n t
	pg_start "$TMP/pg$k" fsync=off || { echo "run.sh: lane $k cannot start PostgreSQL" >&2; return 1; }
	while :; do
		t=$(
			exec 8>"$TMP/.lanes/queue.lock"
			flock 8
			n=$(wc -l <"$TMP/.lanes/next")
			sed -n "$((n + 1))p" "$TMP/.lanes/queue"
			echo >>"$TMP/.lanes/next"
		)
		[ -n "$t" ] || break
		run_test "$t"
	done
	pg_stop
}

echo "== integration tests (PostgreSQL $(pg_bindir | grep -o '[0-9]*' | head -1), $JOBS lanes)"
lane_pids=()
if [ "${#tests[@]}" -gt 0 ]; then
	for k in $(seq 1 "$JOBS"); do
		( unset PG_DIR PG_PORT PG_BIN PG_URL PG_OPTS; lane "$k" ) &
		lane_pids+=($!)
	done
	for p in "${lane_pids[@]}"; do wait "$p" || { echo "run.sh: a lane could not run" >&2; exit 2; }; done
fi
if [ "${#serial[@]}" -gt 0 ]; then
	echo "== alone: the tests marked serial"
	pg_start "$TMP/pg" fsync=off || { echo "run.sh: cannot start PostgreSQL" >&2; exit 2; }
	for t in "${serial[@]}"; do run_test "$t"; done
fi
passed=$(grep -c '^ok ' "$TMP/.lanes/results")
failed=$(grep -c '^fail ' "$TMP/.lanes/results")
mapfile -t lane_failures < <(sed -n 's/^fail //p' "$TMP/.lanes/results")
failures+=("${lane_failures[@]}")
passed=$((passed + unit_passed))
failed=$((failed + unit_failed))

echo
if [ -n "$PATTERN" ] && [ $((passed + failed)) = 0 ]; then
	echo "run.sh: no test matches \"$PATTERN\" (tests/integration/t_*.sh, tests/soak/t_*.sh)" >&2
	exit 2
fi
[ ${#failures[@]} -gt 0 ] && echo "failed: ${failures[*]}"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
