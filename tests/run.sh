#!/usr/bin/env bash
# run.sh BUILD_DIR — runs every test: the cmocka unit tests of BUILD_DIR,
# then each tests/integration/t_*.sh against a throwaway PostgreSQL
# cluster started here.  Ends with the line "N passed, N failed".
#   tests/run.sh build-asan              all tests
#   tests/run.sh build-asan t_rollback   integration tests matching a pattern
#   tests/run.sh build-asan t_a t_b      ... matching any of the patterns
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
cleanup() { pg_stop; [ -n "${T_KEEP:-}" ] || rm -rf "$TMP"; }
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

echo "== integration tests (PostgreSQL $(pg_bindir | grep -o '[0-9]*' | head -1))"
pg_start "$TMP/pg" fsync=off || { echo "run.sh: cannot start PostgreSQL" >&2; exit 2; }
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
	export T_TMP="$TMP/$name"
	mkdir -p "$T_TMP"; chmod 777 "$T_TMP"
	start=$SECONDS
	timeout -k 10 300 bash "$t" >"$T_TMP/output" 2>&1; rc=$?
	if [ "$rc" = 0 ]; then
		passed=$((passed + 1))
		printf '  ok   %-34s %3ds\n' "$name" $((SECONDS - start))
	else
		failed=$((failed + 1)); failures+=("$name")
		printf '  FAIL %-34s %3ds (exit %s)\n' "$name" $((SECONDS - start)) "$rc"
		sed 's/^/       | /' "$T_TMP/output" | tail -n 60
		for log in "$T_TMP"/*.log; do
			[ -f "$log" ] || continue
			echo "       -- $(basename "$log") (last lines)"
			tail -n 15 "$log" | sed 's/^/       | /'
		done
	fi
	grep -h '^  ' "$T_TMP/output" | sed 's/^/       /' || true
done

echo
if [ -n "$PATTERN" ] && [ $((passed + failed)) = 0 ]; then
	echo "run.sh: no test matches \"$PATTERN\" (tests/integration/t_*.sh, tests/soak/t_*.sh)" >&2
	exit 2
fi
[ ${#failures[@]} -gt 0 ] && echo "failed: ${failures[*]}"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
