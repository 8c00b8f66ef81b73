# No claim waits for the claim floor's probe (src/lib/relay/floor.c).
# The probe, pgoutbox.claim_floor(), runs on a connection of the relay's
# own.  Here it is made to hang: the test database's claim_floor() first
# waits for an advisory lock the test holds (then calls a copy of the
# real one).  While the probe hangs, events sent must still be delivered
# at once; a probe that rode in front of a claim, as it did before, held
# that claim and every delivery until the lock went (or until its
# lock_timeout, 5 s).  After the lock the floor moves on past them, and
# nothing is lost or sent twice.
. "$(dirname "$0")/../lib.sh"
t_db
psql -XAtq -v ON_ERROR_STOP=1 "$DATABASE_URL" >/dev/null <<'SQL'
DO $$ BEGIN
    EXECUTE replace(replace(pg_get_functiondef('pgoutbox.claim_floor(text, bigint, bigint, text[])'::regprocedure),
                            'pgoutbox.claim_floor(', 'pgoutbox.claim_floor_real('),
                    'claim_floor.queue', 'claim_floor_real.queue');
END $$;
CREATE OR REPLACE FUNCTION pgoutbox.claim_floor(queue text, floor bigint, line bigint, writers text[],
                                     OUT new_floor bigint, OUT new_line bigint,
                                     OUT new_writers text[])
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_lock(424242);   -- the test holds it to hang the probe
    PERFORM pg_advisory_unlock(424242);
    SELECT f.new_floor, f.new_line, f.new_writers INTO new_floor, new_line, new_writers
      FROM pgoutbox.claim_floor_real(queue, floor, line, writers) f;
END $$;
SQL
probing() {
	q "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgoutbox relay p-$mode'
	   AND wait_event_type = 'Lock' AND wait_event = 'advisory' AND query LIKE '%claim_floor%'"
}
floor_of() { grep -o 'claim floor [0-9]* -> [0-9]*' "$1" | tail -1 | awk '{print $5}'; }
for mode in ordered concurrent; do
	out=$T_TMP/out.$mode
	q "TRUNCATE pgoutbox.outbox" >/dev/null
	start_relay "$out" --mode "$mode" --in-flight 2 --name "p-$mode" --log-level debug
	pid=$RELAY_PID
	wait_until 20 "grep -q 'starting: ' '$out.log'"
	# Warm up until the floor moves.
	q "SELECT pgoutbox.send('t', 'k' || i, 'warm', '{}') FROM generate_series(1, 100) i" >/dev/null
	wait_until 20 '[ "$(grep -c "\"type\":\"warm\"" "$out")" = 100 ]'
	wait_until 20 "grep -q 'claim floor [0-9]* -> [1-9]' '$out.log'"
	# Hang the probe: a session holds the lock, a claim makes the relay
	# probe, the probe waits.
	mkfifo "$T_TMP/lock.$mode"
	psql -XAtq -v ON_ERROR_STOP=1 "$DATABASE_URL" <"$T_TMP/lock.$mode" >/dev/null 2>&1 &
	lock_pid=$!
	PIDS+=("$lock_pid")
	exec {lock_fd}>"$T_TMP/lock.$mode"
	echo "SELECT pg_advisory_lock(424242);" >&"$lock_fd"
	wait_until 10 '[ "$(q "SELECT count(*) FROM pg_locks WHERE locktype = '"'advisory'"' AND objid = 424242 AND granted")" = 1 ]'
	i=0
	until [ "$(probing)" = 1 ]; do
		i=$((i + 1))
		[ $i -le 200 ] || fail "$mode: the probe never waited for the lock"
		q "SELECT pgoutbox.send('t', 'n$i', 'nudge', '{}')" >/dev/null
		sleep 0.02
	done
	nudges=$i
	# With the probe hanging, events still flow, and fast.
	t0=$(date +%s%N)
	q "SELECT pgoutbox.send('t', 'k' || i, 'during', '{}') FROM generate_series(1, 200) i" >/dev/null
	wait_until 3 '[ "$(grep -c "\"type\":\"during\"" "$out")" = 200 ]'
	ms=$((($(date +%s%N) - t0) / 1000000))
	[ "$(probing)" = 1 ] || fail "$mode: the probe no longer waited when the events had arrived"
	echo "SELECT pg_advisory_unlock(424242);" >&"$lock_fd"
	exec {lock_fd}>&-
	wait "$lock_pid" || true
	# The floor moves on past the events sent while it hung (a claim
	# makes the relay probe: a few more events).
	last=$(grep '"type":"during"' "$out" | grep -o '^{"id":[0-9]*' | cut -d: -f2 | sort -n | tail -1)
	k=0
	until [ "$(floor_of "$out.log")" -gt "$last" ]; do
		k=$((k + 1))
		[ $k -le 200 ] || fail "$mode: the floor stayed at $(floor_of "$out.log"), below event $last, after the probe was let go"
		q "SELECT pgoutbox.send('t', 'a$k', 'after', '{}')" >/dev/null
		sleep 0.05
	done
	stop_relay "$pid"
	want=$((100 + nudges + 200 + k))
	total=$(ids_of "$out" | wc -l)
	uniq=$(ids_of "$out" | sort -u | wc -l)
	[ "$total" = "$want" ] && [ "$uniq" = "$want" ] ||
		fail "$mode: $total deliveries of $uniq events (want $want of $want)"
	[ "$(pending)" = 0 ] || fail "$mode: $(pending) events left in the outbox"
	note "$mode: 200 events delivered in $ms ms while the floor's probe hung; the floor passed them after ($(floor_of "$out.log"))"
done
