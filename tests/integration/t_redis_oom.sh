# Redis out of memory (maxmemory with noeviction: XADD replies "OOM ...")
# is an outage, not the events' failure (issue 19, item 4): no attempt is
# spent, nothing is dead-lettered, and once memory is raised every event
# arrives, per key in commit order (ordered mode).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../redis.sh"
trap 'cleanup_pids; redis_stop' EXIT
redis_start "$T_TMP/redis" --maxmemory-policy noeviction
t_db
# Without the fix the OOM replies would dead-letter everything in seconds.
export PGOUTBOX_RELAY_RETRY_BASE=10ms PGOUTBOX_RELAY_RETRY_MAX=20ms PGOUTBOX_RELAY_MAX_ATTEMPTS=3
export PGOUTBOX_RELAY_RECONNECT_MAX=300ms
# n events on keys k1..k10, one transaction per 10 (commit order = id order).
send_n() {
	local i
	for i in $(seq "$1"); do
		q "INSERT INTO pgoutbox.outbox (topic, key, type, payload) SELECT 'a', 'k' || j, 'x', jsonb_build_object('j', j) FROM generate_series(1, 10) j"
	done
}
oom_errors() { rcli INFO errorstats | tr -d '\r' | sed -n 's/^errorstat_OOM:count=//p'; }

start_relay "$T_TMP/relay" --sink redis --redis "$REDIS_URL" --mode ordered --batch 50
send_n 5
wait_until 30 '[ "$(pending)" = 0 ]'
# A byte of memory: every write is refused.
rcli CONFIG SET maxmemory 1 >/dev/null
send_n 30
wait_until 30 '[ "$(oom_errors)" -ge 10 ]'
kill -0 "$RELAY_PID" || fail "the relay exited on OOM"
[ "$(q 'SELECT count(*) FROM pgoutbox.dead_letters')" = 0 ] || fail "dead letters on OOM: $(q 'SELECT id, attempts, last_error FROM pgoutbox.dead_letters LIMIT 3')"
[ "$(q 'SELECT coalesce(max(attempts), 0) FROM pgoutbox.outbox')" = 0 ] || fail "OOM spent attempts: $(q 'SELECT max(attempts), min(last_error) FROM pgoutbox.outbox')"
[ "$(pending)" = 300 ] || fail "expected the 300 events sent during OOM in the outbox, found $(pending)"
grep -q 'sink unavailable (redis: OOM' "$T_TMP/relay.log" || fail "the OOM is not in the log: $(tail -3 "$T_TMP/relay.log")"
note "Redis OOM: $(oom_errors) OOM replies, $(pending) events wait, attempts 0"
rcli CONFIG SET maxmemory 0 >/dev/null
wait_until 30 '[ "$(pending)" = 0 ]'
stop_relay "$RELAY_PID"
[ "$(q 'SELECT count(*) FROM pgoutbox.dead_letters')" = 0 ] || fail "dead letters after OOM"
# Every event, and per key the first delivery of each in id order.
rcli --json XRANGE pgoutbox:a - + | python3 -c '
import json, sys
first = {}
for _, f in json.load(sys.stdin):
    e = dict(zip(f[0::2], f[1::2]))
    seen = first.setdefault(e["key"], [])
    i = int(e["id"])
    if i not in seen:
        seen.append(i)
ids = sorted(i for s in first.values() for i in s)
bad = [k for k, s in first.items() if s != sorted(s)]
if len(ids) != 350 or bad:
    sys.exit("events %d of 350, keys out of order: %s" % (len(ids), bad))
' || fail "after OOM: not every event, or not in order"
note "after raising maxmemory: 350 of 350 events, per-key order kept"
