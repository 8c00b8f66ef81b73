# PostgreSQL restarted under an ordered relay of several connections:
# every connection comes back at once and runs its lease round, slot 0's
# with its beat in front.  The beat deleted the rows of the members
# whose session the restart ended and refreshed its own before the lease
# round behind it took the queue's rebalance lock, while another slot's
# lease round held that lock and deleted the same rows: "lease round
# failed: deadlock detected" between the relay's own connections (issue
# 44, item 7).  Slot 0 now takes the lock first, as rebalance() does.
. "$(dirname "$0")/../lib.sh"
# A cluster of its own, so restarting it disturbs no other test.
PG_PORT= pg_start "$T_TMP/pg" fsync=off
trap 'cleanup_pids; pg_stop' EXIT
t_db
start_relay "$T_TMP/out" --sink stdout --mode ordered --in-flight 8 \
	--heartbeat 200ms --poll-interval 1s
relay=$RELAY_PID
# The shards whose lease some session holds.
owned() { q "SELECT count(DISTINCT objid) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2 AND granted AND classid = pgoutbox.lease_ns('outbox')::oid AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"; }
shards=$(q "SELECT shards FROM pgoutbox.queues WHERE name = 'outbox'")
wait_until 20 '[ "$(owned)" = "$shards" ]'
for i in 1 2 3 4 5 6; do
	pg_as "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m fast -w stop >/dev/null
	sleep 0.3
	pg_start_again
	wait_until 30 '[ "$(owned)" = "$shards" ]'
	sleep 1
done
kill -0 "$relay" || fail "the relay exited when PostgreSQL went away"
q "INSERT INTO pgoutbox.outbox (topic, key, type, payload) SELECT 't', 'k' || (g % 50), 'x', '{}' FROM generate_series(1, 500) g"
wait_until 30 '[ "$(pending)" = 0 ]'
stop_relay "$relay"
n=$(grep -c 'deadlock detected' "$T_TMP/out.log" || true)
[ "$n" = 0 ] || { grep 'deadlock detected' "$T_TMP/out.log" | head -3 >&2; fail "$n deadlocks between the relay's connections after 6 restarts"; }
note "6 restarts, every shard leased again after each, no deadlock"
