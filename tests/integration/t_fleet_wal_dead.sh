# A WAL queue's dead letters do not hold up a fleet (docs/wal.md,
# docs/fleet.md).  One relay process serves two databases of one
# cluster: fwa's queue ev is captured through the WAL, fwb's is a table
# queue.  While a session holds fwa's pgoutbox.dead_letters locked (as a
# migration would), an event the sink rejects for good is dead-lettered
# in fwa: its INSERT waits for the lock, and meanwhile
#  - probe events sent in fwb arrive within 2 s each (the loop goes on);
#  - fwa's later events wait behind the dead one (its FIFO keeps order);
# then the lock goes: the dead letter is written once, fwa's later events
# follow in order, and the slot is confirmed past everything.
# Failed with the blocking write: the first probe took the lock's time.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../fleet_wal.sh"
fleet_wal_setup
fleet_wal_sink 'echo "dead $id refused for good"'
export PGOUTBOX_RELAY_RETRY_BASE=50ms PGOUTBOX_RELAY_RETRY_MAX=200ms
fleet_wal_start "$(pg_url fwa)" "$(pg_url fwb)"

# The lock, held for 12 s; then the poison event and one after it.
LOCK=12
psql -XAtq "$(pg_url fwa) application_name=t_lock" -c "BEGIN" \
	-c "LOCK TABLE pgoutbox.dead_letters IN ACCESS EXCLUSIVE MODE" \
	-c "SELECT pg_sleep($LOCK)" -c "COMMIT" >/dev/null 2>&1 &
locker=$!
PIDS+=("$locker")
wait_until 10 '[ "$(sql fwa "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = '\''dead_letters'\'' AND l.granted AND l.mode = '\''AccessExclusiveLock'\''")" = 1 ]'
locked_at=$SECONDS
BAD=$(send fwa bad 2)
send fwa a 3 >/dev/null
# The dead letter's INSERT waits for the lock.
wait_until 10 '[ "$(sql fwa "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = '\''Lock'\'' AND query LIKE '\''INSERT INTO pgoutbox.dead_letters%'\''")" = 1 ]'
probes=$(probes_until $((locked_at + LOCK - 5)) "fwa's dead letter waited for its lock")
from fwa | qgrep '"n": 3}' && fail "fwa's event after the dead one was delivered before the dead letter was written"
[ "$(sql fwa "SELECT count(*) FROM pg_locks WHERE relation = 'pgoutbox.dead_letters'::regclass AND granted AND mode = 'AccessExclusiveLock'")" = 1 ] ||
	fail "the lock went before the probes ended: nothing measured"

# The lock goes: written once, then the rest in order.
wait "$locker" || true
fleet_wal_written "$BAD" 1
note "fwa's dead letter waited $LOCK s for a lock: $(echo "$probes" | wc -l) probes on fwb, max $(max $probes) ms; then written once, fwa's next event after it"
