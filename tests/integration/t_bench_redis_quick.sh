# The latency benchmark through Redis in quick mode (bench/redis-latency.sh
# --quick): every scenario, wake-up and consumer runs with tiny counts and
# its row must be in the table with nothing lost (it checks that the chain
# works, not how fast).
# serial: timing-sensitive, run alone (tests/run.sh)
. "$(dirname "$0")/../lib.sh"
cd "$(dirname "$0")/../.."
command -v redis-server >/dev/null || fail "redis-server not found"
command -v node >/dev/null || fail "node not found (needed for the BullMQ Worker)"
env -u PG_PORT -u PG_DIR -u PG_URL -u REDIS_PORT bench/redis-latency.sh "$(dirname "$PGO_BIN")" --quick \
	>"$T_TMP/bench.log" 2>&1 || { tail -n 40 "$T_TMP/bench.log"; fail "bench/redis-latency.sh --quick failed"; }
grep -q '^8 runs in .*, 0 failed$' "$T_TMP/bench.log" || fail "summary: $(tail -n 3 "$T_TMP/bench.log")"
for sc in A B; do
	for sink in 'redis / pgoutbox consume' 'bullmq / BullMQ Worker'; do
		for wake in 'NOTIFY' 'poll 1 s'; do
			row=$(grep "^| $sc: .* | $sink | $wake | " "$T_TMP/bench.log") ||
				fail "row $sc / $sink / $wake missing from the table"
			# columns: | scenario | sink | wakeup | n | p50 | p95 | p99 | max | lost | dups | ...
			lost=$(awk -F' [|] ' '{print $9}' <<<"$row")
			n=$(awk -F' [|] ' '{print $4}' <<<"$row")
			[ "$lost" = 0 ] || fail "$sc / $sink / $wake: lost $lost: $row"
			[ "$n" -gt 0 ] || fail "$sc / $sink / $wake: nothing arrived: $row"
		done
	done
done
note "$(grep -c '^| [AB]: ' "$T_TMP/bench.log") rows, lost 0; $(grep ' runs in ' "$T_TMP/bench.log")"
