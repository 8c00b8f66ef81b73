# No claim waits for the claim floor's probe (src/lib/relay/floor.c): the
# probe, pgoutbox.claim_floor(), reads pgoutbox.queues, the queue's
# sequence and pg_locks, and runs on a connection of the relay's own.  A
# session holds pgoutbox.queues locked for a while, so the probe waits
# for the lock; events sent meanwhile must still be delivered at once (a
# probe that rode in front of a claim, as before, held that claim and
# every delivery until the lock went).  After the lock the floor moves
# on, and nothing is lost or sent twice.
. "$(dirname "$0")/../lib.sh"
t_db
for mode in ordered concurrent; do
	out=$T_TMP/out.$mode
	q "TRUNCATE pgoutbox.outbox" >/dev/null
	start_relay "$out" --mode "$mode" --in-flight 2 --name "p-$mode" --log-level debug
	pid=$RELAY_PID
	wait_until 20 "grep -q 'claim-floor connection' '$out.log'"
	# Warm up: the floor starts moving.
	q "SELECT pgoutbox.send('t', 'k' || i, 'warm', '{}') FROM generate_series(1, 100) i" >/dev/null
	wait_until 20 '[ "$(grep -c "\"type\":\"warm\"" "$out")" = 100 ]'
	wait_until 20 "grep -q 'claim floor [0-9]* -> [1-9]' '$out.log'"
	# A session holds the lock the probe needs; wait until the probe waits.
	mkfifo "$T_TMP/lock.$mode"
	psql -XAtq -v ON_ERROR_STOP=1 "$DATABASE_URL" <"$T_TMP/lock.$mode" >/dev/null 2>&1 &
	lock_pid=$!
	PIDS+=("$lock_pid")
	exec {lock_fd}>"$T_TMP/lock.$mode"
	echo "BEGIN; LOCK TABLE pgoutbox.queues IN ACCESS EXCLUSIVE MODE;" >&"$lock_fd"
	# Claims keep going out while the relay is busy: each wants a probe.
	for i in $(seq 1 20); do
		q "SELECT pgoutbox.send('t', 'k' || $i, 'nudge', '{}')" >/dev/null
	done
	wait_until 20 '[ "$(q "SELECT count(*) FROM pg_stat_activity WHERE application_name = '"'pgoutbox relay p-$mode'"'
	   AND wait_event_type = '"'Lock'"' AND query LIKE '"'%claim_floor%'"'")" = 1 ]'
	# With the probe stuck, events still flow.
	t0=$(date +%s%N)
	q "SELECT pgoutbox.send('t', 'k' || i, 'during', '{}') FROM generate_series(1, 200) i" >/dev/null
	wait_until 10 '[ "$(grep -c "\"type\":\"during\"" "$out")" = 200 ]'
	ms=$((($(date +%s%N) - t0) / 1000000))
	# The probe was still waiting all along.
	[ "$(q "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgoutbox relay p-$mode'
	   AND wait_event_type = 'Lock' AND query LIKE '%claim_floor%'")" = 1 ] ||
		fail "$mode: the probe was no longer waiting for the lock"
	echo "COMMIT;" >&"$lock_fd"
	exec {lock_fd}>&-
	wait "$lock_pid" || true
	# The floor moves on after the lock, past the events sent during it.
	floor_before=$(grep -o 'claim floor [0-9]* -> [0-9]*' "$out.log" | tail -1 | awk '{print $5}')
	q "SELECT pgoutbox.send('t', 'k' || i, 'after', '{}') FROM generate_series(1, 100) i" >/dev/null
	wait_until 20 '[ "$(grep -c "\"type\":\"after\"" "$out")" = 100 ]'
	wait_until 20 '[ "$(grep -o "claim floor [0-9]* -> [0-9]*" "$out.log" | tail -1 | awk "{print \$5}")" -gt "$floor_before" ]'
	stop_relay "$pid"
	total=$(ids_of "$out" | wc -l)
	uniq=$(ids_of "$out" | sort -u | wc -l)
	[ "$total" = 420 ] && [ "$uniq" = 420 ] || fail "$mode: $total deliveries of $uniq events (want 420 of 420)"
	[ "$(pending)" = 0 ] || fail "$mode: $(pending) events left in the outbox"
	note "$mode: 200 events delivered in $ms ms while the floor's probe waited for a lock"
done
