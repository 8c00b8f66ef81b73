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
unset PG_PORT PG_DIR PG_URL PG_OPTS
pg_start "$T_TMP/pgwal" wal_level=logical max_replication_slots=4 max_wal_senders=4 fsync=off ||
	fail "cannot start a cluster with wal_level=logical"
trap 'cleanup_pids; pg_stop' EXIT
url() { pg_url "$1"; }
t_db fwa
"$PGO_BIN" queue create ev --capture wal >/dev/null || fail "queue create ev --capture wal in fwa"
t_db fwb
"$PGO_BIN" queue create ev --kind outbox >/dev/null || fail "queue create ev in fwb"
sql() { psql -XAtq -v ON_ERROR_STOP=1 "$(url "$1")" -c "$2"; }
send() { sql "$1" "SELECT pgoutbox.send_to('ev', 't', '$2', 'x', '{\"n\": $3}')"; }
# Lines of database $1 delivered so far.
from() { grep -F "\"pgoutbox-source\": \"$1\"" "$OUT" || true; }
# A probe event sent in fwb: ms until delivered (3 s at most).
probe() {
	local id t0 t1
	t0=$(date +%s%N)
	id=$(send fwb probe 0)
	wait_until 3 'from fwb | qgrep "^{\"id\":$id,"'
	t1=$(date +%s%N)
	echo $(((t1 - t0) / 1000000))
}

# The sink: key "bad" is dead for good; the rest is appended to out.
cat >"$T_TMP/sink.sh" <<SH
#!/bin/bash
while IFS= read -r line; do
	id=\${line#*\"id\":}; id=\${id%%,*}
	key=\${line#*\"key\":\"}; key=\${key%%\"*}
	if [ "\$key" = bad ]; then
		echo "dead \$id refused for good"
	else
		echo "\$line" >> "$T_TMP/out"
	fi
done
SH
chmod +x "$T_TMP/sink.sh"
: >"$T_TMP/out"
OUT=$T_TMP/out
export PGOUTBOX_RELAY_RETRY_BASE=50ms PGOUTBOX_RELAY_RETRY_MAX=200ms
start_relay "$T_TMP/r" --queue ev --sink exec --exec "$T_TMP/sink.sh" --db "$(url fwa)" --db "$(url fwb)"
relay=$RELAY_PID
wait_until 30 'grep -q "streaming slot" "$T_TMP/r.log"'
send fwa a 1 >/dev/null
wait_until 10 'from fwa | qgrep "\"n\": 1}"'
[ "$(probe)" -le 2000 ] || fail "fwb's first probe"

# The lock, held for 12 s; then the poison event and one after it.
LOCK=12
psql -XAtq "$(url fwa) application_name=t_lock" -c "BEGIN" \
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
probes=()
while [ $((SECONDS - locked_at)) -lt $((LOCK - 5)) ]; do
	ms=$(probe)
	[ "$ms" -le 2000 ] || fail "a probe on fwb took $ms ms while fwa's dead letter waited for its lock (the loop was held up)"
	probes+=("$ms")
	sleep 0.3
done
[ "${#probes[@]}" -ge 3 ] || fail "only ${#probes[@]} probes while the lock was held"
from fwa | qgrep '"n": 3}' && fail "fwa's event after the dead one was delivered before the dead letter was written"
[ "$(sql fwa "SELECT count(*) FROM pg_locks WHERE relation = 'pgoutbox.dead_letters'::regclass AND granted AND mode = 'AccessExclusiveLock'")" = 1 ] ||
	fail "the lock went before the probes ended: nothing measured"

# The lock goes: written once, then the rest in order.
wait "$locker" || true
wait_until 20 'from fwa | qgrep "\"n\": 3}"'
[ "$(sql fwa "SELECT id || ' ' || attempts || ' ' || last_error FROM pgoutbox.dead_letters")" = "$BAD 1 refused for good" ] ||
	fail "dead letters in fwa: $(sql fwa "SELECT * FROM pgoutbox.dead_letters")"
grep -q "event $BAD to dead letters" "$T_TMP/r.log" || fail "no log line for the dead letter: $(tail -5 "$T_TMP/r.log")"
n=$(from fwa | grep -o '"n": [0-9]*' | cut -d' ' -f2 | tr '\n' ' ')
[ "$n" = "1 3 " ] || fail "fwa delivered n: '$n', want '1 3 '"
end=$(sql fwa "SELECT pg_current_wal_lsn() - '0/0'")
wait_until 20 '[ "$(sql fwa "SELECT confirmed_flush_lsn - '"'0/0'"' >= $end FROM pg_replication_slots WHERE slot_name = '"'pgoutbox_ev'"'")" = t ]'
kill -0 "$relay" || fail "the relay died"
stop_relay "$relay"
max() { printf '%s\n' "$@" | sort -n | tail -1; }
note "fwa's dead letter waited $LOCK s for a lock: ${#probes[@]} probes on fwb, max $(max "${probes[@]}") ms; then written once, fwa's next event after it"
