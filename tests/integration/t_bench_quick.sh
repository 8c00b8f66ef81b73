# The benchmark's quick mode: every workload of `make bench` runs (tiny
# counts; it checks that they work, not how fast).
# serial: timing-sensitive, run alone (tests/run.sh)
. "$(dirname "$0")/../lib.sh"
cd "$(dirname "$0")/../.."
env -u PG_PORT -u PG_DIR -u PG_URL bench/run.sh "$(dirname "$PGO_BIN")" --quick >"$T_TMP/bench.log" 2>&1 || { tail -n 40 "$T_TMP/bench.log"; fail "bench --quick failed"; }
grep -q ' workloads in .*, 0 failed' "$T_TMP/bench.log" || fail "bench summary: $(tail -n 3 "$T_TMP/bench.log")"
for w in enqueue drain latency notify-rtt steady held-xmin history work; do
	grep -q "^| $w " "$T_TMP/bench.log" || fail "workload $w missing from the table"
done
grep -Eq '^\| work \| .* groups, group_concurrency 1, .*\| jobs_per_s \| .* of plain \|$' "$T_TMP/bench.log" || fail "no work-queue workload with groups beside the plain queue"
grep -q 'WAL capture, queue benchwal' "$T_TMP/bench.log" || fail "no WAL-capture workload in the table"
grep -q '^WAL capture beside table capture' "$T_TMP/bench.log" || fail "no WAL-beside-table summary"
note "$(grep ' workloads in ' "$T_TMP/bench.log")"
