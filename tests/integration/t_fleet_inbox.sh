# A relay fleet of two databases whose events have the same ids, into one
# Redis stream: each entry's headers name its source database, `pgoutbox
# consume` applies every event of both exactly once (its inbox keys on
# SOURCE/ID), and a re-sent entry is dropped.  The fleet's /metrics has
# one family per metric with a series per database, and /readyz names
# the database that is down while it is.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../redis.sh"
trap 'cleanup_pids; redis_stop' EXIT
redis_start "$T_TMP/redis"
N=50
for d in t_fleet_inbox_b t_fleet_inbox; do
	t_db "$d"
	q "INSERT INTO pgoutbox.outbox (topic, key, type, payload)
	   SELECT 'orders', 'k' || i, 'x', jsonb_build_object('n', i) FROM generate_series(1, $N) i"
done
A=$(pg_url t_fleet_inbox_b) B=$(pg_url t_fleet_inbox)
# Both databases' events have the ids 1..N: an inbox keyed on ids alone
# would take the second database's for duplicates.
q "CREATE TABLE effects (n int);
   CREATE FUNCTION apply_msg(p jsonb) RETURNS void LANGUAGE sql AS
   \$\$ INSERT INTO effects VALUES ((p->>'n')::int) \$\$"
MPORT=$(pg_free_port)
start_relay "$T_TMP/relay" --sink redis --redis "$REDIS_URL" --redis-stream s \
	--metrics-listen "127.0.0.1:$MPORT" --db "$A" --db "$B"
relay=$RELAY_PID
wait_until 30 '[ "$(rcli XLEN s)" = $((2 * N)) ]'
for src in t_fleet_inbox_b t_fleet_inbox; do
	[ "$(rcli XRANGE s - + | grep -c "\"pgoutbox-source\": \"$src\"")" = $N ] ||
		fail "entries of $src: $(rcli XRANGE s - + | grep -c "\"pgoutbox-source\": \"$src\"") of $N"
done
curl -sf "http://127.0.0.1:$MPORT/metrics" >"$T_TMP/metrics"
for src in t_fleet_inbox_b t_fleet_inbox; do
	grep -q "^pgoutbox_events_published_total{database=\"$src\",queue=\"outbox\"" "$T_TMP/metrics" ||
		fail "no published series for $src: $(grep '^pgoutbox_events_published_total' "$T_TMP/metrics")"
done
[ "$(grep -c '^# TYPE pgoutbox_events_published_total ' "$T_TMP/metrics")" = 1 ] || fail "a family is written twice"
[ "$(grep '^# TYPE ' "$T_TMP/metrics" | sort | uniq -d | wc -l)" = 0 ] || fail "families written twice: $(grep '^# TYPE ' "$T_TMP/metrics" | sort | uniq -d)"
curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$MPORT/readyz" | qgrep 200 || fail "/readyz not 200 with both up"
# A down database makes /readyz name it (its database is dropped).
psql -XAtq "$(pg_url postgres)" -c "DROP DATABASE t_fleet_inbox_b WITH (FORCE)" >/dev/null
wait_until 10 'curl -s "http://127.0.0.1:$MPORT/readyz" | qgrep "database t_fleet_inbox_b"'
stop_relay "$relay"
# A re-send of one entry, as after a relay's crash.
python3 - "$REDIS_PORT" <<'PY'
import subprocess, sys
port = sys.argv[1]
def r(*a):
    return subprocess.run(['redis-cli', '-p', port, *a], check=True, capture_output=True, text=True).stdout.split('\n')
first = r('XRANGE', 's', '-', '+', 'COUNT', '1')
fields = [x for x in first[1:] if x != '']
r('XADD', 's', '*', *fields)
PY
[ "$(rcli XLEN s)" = $((2 * N + 1)) ] || fail "the re-send was not added"
"$PGO_BIN" consume --redis "$REDIS_URL" --stream s --group g \
	--sql apply_msg >"$T_TMP/c.out" 2>"$T_TMP/c.log" &
c=$!; PIDS+=("$c")
wait_until 30 '[ "$(rcli XPENDING s g | head -1)" = 0 ] && [ "$(q "SELECT count(*) FROM effects")" -ge $((2 * N)) ]'
kill -TERM "$c"; wait "$c" || true
[ "$(q "SELECT count(*) FROM effects")" = $((2 * N)) ] || fail "effects: $(q "SELECT count(*) FROM effects") of $((2 * N))"
[ "$(q "SELECT count(*) FROM pgoutbox.inbox WHERE message_id LIKE 't_fleet_inbox_b/%'")" = $N ] ||
	fail "inbox rows of t_fleet_inbox_b: $(q "SELECT string_agg(message_id, ' ') FROM pgoutbox.inbox" | head -c 300)"
[ "$(q "SELECT count(*) FROM pgoutbox.inbox WHERE message_id LIKE 't_fleet_inbox/%'")" = $N ] || fail "inbox rows of t_fleet_inbox"
grep -q "duplicates skipped 1" "$T_TMP/c.log" || fail "the re-send was not skipped: $(grep 'pgoutbox consume:' "$T_TMP/c.log")"
note "$((2 * N)) events of 2 databases with the same ids applied once each; the re-send skipped"
