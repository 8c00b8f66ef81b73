# The sweep below the claim floor is bounded per claim (issue 21): an
# event inserted by hand with an old id, far below the floor, is still
# found and delivered, and no claim meanwhile walks the dead index entries
# a held snapshot keeps below the floor.  A sweep that claimed from id 0
# read all of them in one claim (about 1 s per 2 million, while its batch
# waited); the sweep now reads the table's pages a few at a time.
#
# The claims' own durations come from the server (auto_explain, for this
# database's sessions only), so the check holds for any relay build.
# serial: timing-sensitive, run alone (tests/run.sh)
. "$(dirname "$0")/../lib.sh"
t_db
db=$(basename "$0" .sh)
DEAD=${T_DEAD:-2000000}
LIMIT_MS=100
LOG=$PG_DIR/server.log

# A snapshot held for the whole test: nothing deleted below can be
# removed or even marked dead in the index.
psql -XAtq "$DATABASE_URL" -c "BEGIN ISOLATION LEVEL REPEATABLE READ" \
	-c "SELECT txid_current()" -c "SELECT count(*) FROM pgoutbox.outbox" \
	-c "SELECT pg_sleep(300)" >/dev/null 2>&1 &
PIDS+=($!)
wait_until 10 '[ "$(q "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE '\''SELECT pg_sleep(300)%'\''")" = 1 ]'
q "INSERT INTO pgoutbox.outbox (topic, key, type, payload) SELECT 't', 'k' || (i % 50), 'gone', '{}' FROM generate_series(1, $DEAD) i"
q "DELETE FROM pgoutbox.outbox"
q "ALTER DATABASE $db SET session_preload_libraries = 'auto_explain'"
q "ALTER DATABASE $db SET auto_explain.log_min_duration = '${LIMIT_MS}ms'"

# Sweeps every poll interval (1 s).
start_relay "$T_TMP/out" --sink stdout --poll-interval 1s --log-level debug
q "INSERT INTO pgoutbox.outbox (topic, key, type, payload) SELECT 't', 'k' || (i % 50), 'live', '{}' FROM generate_series(1, 200) i"
wait_until 60 '[ "$(pending)" = 0 ]'
# The relay's first claims start below the dead rows (the floor is not
# known yet); from here on the floor is past them.
wait_until 20 'grep -q "claim floor .* -> " "$T_TMP/out.log"'
q "INSERT INTO pgoutbox.outbox (topic, key, type, payload) SELECT 't', 'k' || (i % 50), 'live', '{}' FROM generate_series(1, 200) i"
wait_until 30 '[ "$(pending)" = 0 ]'
from=$(stat -c %s "$LOG")
q "INSERT INTO pgoutbox.outbox (id, topic, key, type, payload) VALUES (7, 't', 'k7', 'resent', '{}')"
# Events keep coming while the sweep looks for it.
for _ in $(seq 20); do
	q "INSERT INTO pgoutbox.outbox (topic, key, type, payload) SELECT 't', 'k' || (i % 50), 'live', '{}' FROM generate_series(1, 50) i"
	sleep 0.1
done
wait_until 60 'grep -q "\"type\":\"resent\"" "$T_TMP/out"'
wait_until 30 '[ "$(pending)" = 0 ]'
pids=$(q "SELECT string_agg(pid::text, '|') FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE 'pgoutbox relay%'")
[ -n "$pids" ] || fail "no relay session found"
stop_relay "$RELAY_PID"
slow=$(tail -c +"$((from + 1))" "$LOG" | claims_over "$pids")
[ -z "$slow" ] || fail "claims took over ${LIMIT_MS} ms with $DEAD dead entries below the floor: $(echo $slow | tr '\n' ' ')"
n=$(grep -c '"type":"resent"' "$T_TMP/out" || true)
[ "$n" = 1 ] || fail "the event re-sent with id 7 was delivered $n times"
sweeps=$(grep -c "claim [0-9.]* (sweep of [0-9]* pages)" "$T_TMP/out.log" || true)
[ "$sweeps" -gt 0 ] || fail "no sweeping claim in the relay's log"
# The pages per sweeping claim are sized by time, within 4..512.
sizes=$(grep -o "(sweep of [0-9]* pages)" "$T_TMP/out.log" | tr -dc '0-9\n' | sort -n | uniq | paste -sd, -)
for p in ${sizes//,/ }; do
	[ "$p" -ge 4 ] && [ "$p" -le 512 ] || fail "a sweeping claim of $p pages (sizes seen: $sizes)"
done
# A sweep keeps a pace (claim.c): the table's pages spread over half the
# sweep period (1 s here), not read by one burst of claims at once (that
# took 0.1 s here).  The relay logs each sweep's end.
done_lines=$(grep -o "sweep of [0-9]* pages done in [0-9.]* s" "$T_TMP/out.log" || true)
[ -n "$done_lines" ] || fail "no sweep ended in the relay's log"
spans=
while read -r _ _ pages _ _ _ secs _; do
	[ "$pages" -ge 5000 ] || continue
	spans="$spans $secs"
	awk -v x="$secs" 'BEGIN { exit !(x >= 0.4) }' ||
		fail "a sweep read its $pages pages in $secs s, not paced over half the 1 s period"
done <<<"$done_lines"
[ -n "$spans" ] || fail "no sweep of 5,000 pages or more: $(echo $done_lines)"
note "re-sent event found below $DEAD dead entries; $sweeps sweeping claims of $sizes pages, none over ${LIMIT_MS} ms; sweeps of the table took$spans s"
