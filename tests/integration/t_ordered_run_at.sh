# Per-key order when transactions start in one order and commit in the
# other (the cause of the rare order violations t_kafka_chaos and
# t_nats_ordered found).  An event's run_at defaults to its transaction's
# start time, so a later event of a key can carry an earlier run_at than
# the event before it: producer B begins, producer A begins, A sends v1
# and commits, B sends v2 and commits.  A claim whose transaction started
# between the two begins, but whose snapshot sees both commits, found v2
# due and v1 not yet due (its run_at after the claim's now()), and
# published v2 first.  Here the relay's claim is held after its BEGIN
# (the claim waits for a lock on pgoutbox.shard_leases, which it reads)
# exactly in that window; per key the sink must still get v1 before v2.
. "$(dirname "$0")/../lib.sh"
t_db
# A psql session fed through a fifo, kept open across statements.
open_session() { # name
	mkfifo "$T_TMP/$1.in"
	psql -XAtq -v ON_ERROR_STOP=1 "$DATABASE_URL" <"$T_TMP/$1.in" >"$T_TMP/$1.out" 2>&1 &
	PIDS+=("$!")
	eval "exec {fd_$1}>'$T_TMP/$1.in'"
}
say() { # name sql: runs it and waits until it is done
	local fd_var="fd_$1" mark="done-$RANDOM-$RANDOM"
	echo "$2" >&"${!fd_var}"
	echo "\\echo $mark" >&"${!fd_var}"
	wait_until 20 "grep -q '$mark' '$T_TMP/$1.out'"
}
# The claim itself waits (not a lease round, which reads the table too).
relay_waiting() {
	q "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgoutbox relay r'
	   AND wait_event_type = 'Lock' AND query LIKE 'WITH t AS MATERIALIZED %DELETE FROM pgoutbox.%'"
}
start_relay "$T_TMP/out" --mode ordered --in-flight 1 --name r --poll-interval 60s
wait_until 20 '[ "$(q "SELECT count(*) FROM pgoutbox.shard_leases WHERE owner = '"'r/0'"'")" = 64 ]'
open_session lock
open_session early
for round in 1 2 3 4 5; do
	# B begins before the claim round, A after it.
	say early "BEGIN; SELECT now();"
	say lock "BEGIN; LOCK TABLE pgoutbox.shard_leases IN ACCESS EXCLUSIVE MODE;"
	q "SELECT pgoutbox.send('t', 'wake', 'x', '{}')" >/dev/null
	wait_until 20 '[ "$(relay_waiting)" = 1 ]'
	q "SELECT pgoutbox.send('t', 'k$round', 'x', '{\"v\": 1}')" >/dev/null
	say early "SELECT pgoutbox.send('t', 'k$round', 'x', '{\"v\": 2}'); COMMIT;"
	say lock "COMMIT;"
	wait_until 20 '[ "$(pending)" = 0 ]'
done
stop_relay "$RELAY_PID"
for round in 1 2 3 4 5; do
	got=$(grep "\"key\":\"k$round\"" "$T_TMP/out" | grep -o '"v": *[0-9]*' | grep -o '[0-9]*$' | tr '\n' ' ')
	[ "$got" = "1 2 " ] || fail "round $round: key k$round arrived as versions: $got (want 1 2)"
done
note "5 rounds of a claim started between two producers' begins: per key, v1 before v2"
