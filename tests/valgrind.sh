#!/usr/bin/env bash
# valgrind.sh BUILD_DIR [PATTERN...] — memcheck over a plain (not ASan)
# build: every cmocka unit test, then the integration tests named below
# (or those matching the PATTERNs, as tests/run.sh matches them) with
# every `pgoutbox` they run under valgrind.  A test passes when it passes
# as usual AND each process it ran ends with no error and nothing
# definitely or indirectly lost; each process's report is kept in the
# test's directory (T_KEEP=1 keeps them).  Ends with the line "N passed,
# N failed".  `make valgrind` (a debug build in build-valgrind, about 8
# minutes).
#   tests/valgrind.sh build-valgrind                 the default set
#   tests/valgrind.sh build-valgrind t_http_sink     one test
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:?usage: tests/valgrind.sh BUILD_DIR [PATTERN...]}
shift
ROOT=$(pwd)
REAL=$ROOT/$BUILD/pgoutbox
[ -x "$REAL" ] || { echo "valgrind.sh: $REAL not built" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "valgrind.sh: valgrind is not installed (apt-get install valgrind)" >&2; exit 2; }
VG=(valgrind --quiet --error-exitcode=99 --leak-check=full
	--errors-for-leak-kinds=definite,indirect
	--show-leak-kinds=definite,indirect --num-callers=30)
# One test per command and sink: each relay sink's delivery, outage and
# stop paths, the inbox and consume, queues and workers, cron, status,
# adopt, capture through the WAL (its dead letters in a fleet too).  Not the chaos tests: hundreds of processes, each slower to
# start under valgrind than their kill loops allow (a SIGTERM that comes
# before main() kills a process, exit 143).
DEFAULT=(t_rollback t_sigterm t_http_sink t_http_failures t_kafka_sink
	t_kafka_outage t_nats_sink t_nats_outage t_rabbitmq_sink
	t_rabbitmq_outage t_redis_sink t_redis_outage t_bullmq t_consume_inbox
	t_inbox t_queue_run t_queue_retry t_cron_history t_status_json
	t_metrics_roles t_config_reload t_retention t_adopt_errors
	t_adopt_redis t_wal_basic t_wal_poison t_fleet_wal_dead
	t_fleet_wal_connect)
patterns=("$@")
[ ${#patterns[@]} -gt 0 ] || patterns=("${DEFAULT[@]}")

passed=0
failed=0
failures=()
TMP=$(mktemp -d /tmp/pgoutbox-valgrind.XXXXXX)
chmod 755 "$TMP"
cleanup() { [ -n "${T_KEEP:-}" ] || rm -rf "$TMP"; }
trap cleanup EXIT

# A report of errors or leaks from valgrind's log file: the lines worth
# printing, empty when clean.
report() {
	grep -E '^==[0-9]+== ' "$1" | grep -v -E '== *$' | head -n 40
}

if [ $# -eq 0 ]; then
	echo "== unit tests under valgrind"
	for t in "$BUILD"/tests/test_*; do
		[ -f "$t" ] && [ -x "$t" ] || continue
		name=$(basename "$t")
		log=$TMP/$name.vg
		out=$("${VG[@]}" --log-file="$log" "$t" 2>&1); rc=$?
		bad=$(report "$log")
		if [ "$rc" = 0 ] && [ -z "$bad" ]; then
			passed=$((passed + 1))
			printf '  ok   %-34s\n' "$name"
		else
			failed=$((failed + 1)); failures+=("$name")
			printf '  FAIL %-34s (exit %s)\n' "$name" "$rc"
			echo "$out" | grep -v '^\[ \(RUN\|       OK\) ' | tail -n 20 | sed 's/^/       | /'
			echo "$bad" | sed 's/^/       | /'
		fi
	done
fi

# The integration tests run pgoutbox through this wrapper: valgrind, one
# log file per process in the test's directory.  Beside it, the rest of
# the build (tests find kafka_mock, the examples, ... next to pgoutbox).
mkdir -p "$TMP/bin"
for f in "$ROOT/$BUILD"/*; do
	[ "$(basename "$f")" = pgoutbox ] || ln -s "$f" "$TMP/bin/"
done
cat >"$TMP/bin/pgoutbox" <<SH
#!/bin/sh
exec ${VG[*]} --log-file="\${T_TMP:-$TMP}/valgrind.%p.vg" "$REAL" "\$@"
SH
chmod 755 "$TMP/bin/pgoutbox"
echo "== integration tests, pgoutbox under valgrind: ${patterns[*]}"
PGO_BIN_WRAP="$TMP/bin/pgoutbox" T_KEEP=1 T_ROOT="$TMP/run" \
	tests/run.sh "$BUILD" "${patterns[@]}" >"$TMP/run.out" 2>&1
# Each test as tests/run.sh judged it, then the processes it ran.  No
# verdict at all (no cluster, no match) is a failure, never a pass.
ran=0
while read -r verdict name _; do
	ran=$((ran + 1))
	bad=""
	nlogs=0
	for log in "$TMP/run/$name"/valgrind.*.vg; do
		[ -f "$log" ] || continue
		nlogs=$((nlogs + 1))
		r=$(report "$log")
		[ -n "$r" ] && bad+="-- $(basename "$log"):"$'\n'"$r"$'\n'
	done
	if [ "$verdict" = ok ] && [ -z "$bad" ] && [ "$nlogs" -gt 0 ]; then
		passed=$((passed + 1))
		printf '  ok   %-34s %d processes clean\n' "$name" "$nlogs"
	else
		failed=$((failed + 1)); failures+=("$name")
		printf '  FAIL %-34s (test: %s, %d processes)\n' "$name" "$verdict" "$nlogs"
		[ "$verdict" = ok ] || sed -n "/^  FAIL $name /,/^  \(ok\|FAIL\) /p" "$TMP/run.out" | head -n 60 | sed 's/^/       | /'
		echo -n "$bad" | sed 's/^/       | /'
	fi
done < <(grep -E '^  (ok|FAIL) +t_' "$TMP/run.out" | sed -E 's/^  (ok|FAIL) +([^ ]+).*/\1 \2/')
if [ "$ran" = 0 ]; then
	echo "  FAIL no integration test ran:" >&2
	tail -n 20 "$TMP/run.out" | sed 's/^/       | /' >&2
	failed=$((failed + 1)); failures+=("(tests/run.sh)")
fi

echo
echo "$passed passed, $failed failed"
[ "$failed" = 0 ] || { echo "failed: ${failures[*]}"; exit 1; }
