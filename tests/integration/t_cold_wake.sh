# A connection cold to producers' notifications (src/lib/relay/relay.c):
# while the relay sleeps, every NOTIFY makes each of its connections
# claim, since the event may be in any one's shards.  With one producer
# writing one key, the connection that does not lease its shard comes
# back dry every time; after COLD_AFTER (16) such claims in a row it looks
# only every COLD_MS (2 ms).  What must hold: an event in a cold
# connection's shards still arrives within milliseconds (not at the
# fallback poll, 60 s here).  (How often it goes cold again after such an
# event depends on the timing: a notification of the event's sender and
# the producer's at once wakes the relay up for the rest of the burst.)
#
# A lone producer commits events of one key (in connection 0's shards)
# one per transaction; once the relay's debug log says connection 1 went
# cold, events of keys in connection 1's shards are sent one by one, each
# awaited; none may take 1 s.  Then every burst event must have arrived.
# serial: timing-sensitive, run alone (tests/run.sh)
. "$(dirname "$0")/../lib.sh"
t_db
psql -XAtq -v ON_ERROR_STOP=1 "$DATABASE_URL" >/dev/null <<'SQL'
CREATE PROCEDURE burst(k text, n integer) LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1..n LOOP
        PERFORM pgoutbox.send('burst', k, 'b', '{}');
        COMMIT;
    END LOOP;
END $$;
SQL
start_relay "$T_TMP/out" --sink stdout --poll-interval 60s --log-level debug
wait_until 20 "[ \$(grep -c 'owns 32 shards' '$T_TMP/out.log' 2>/dev/null) -ge 2 ]"
# Which connection leases which shards: from the log's last lease lines.
mine() { grep -o "member [^ ]*/$1 shards {[0-9,]*}" "$T_TMP/out.log" | tail -n 1 | grep -o '{.*}'; }
s0=$(mine 0) s1=$(mine 1)
[ -n "$s0" ] && [ -n "$s1" ] || fail "no lease lines: $(cat "$T_TMP/out.log")"
# A key in connection 0's shards, and keys in connection 1's.
hot=$(q "SELECT k FROM generate_series(1, 1000) g, LATERAL (SELECT 'hot' || g AS k) x
         WHERE pgoutbox.shard_of(k, 0, 64) = ANY('$s0'::int[]) LIMIT 1")
mapfile -t cold < <(q "SELECT k FROM generate_series(1, 1000) g, LATERAL (SELECT 'cold' || g AS k) x
         WHERE pgoutbox.shard_of(k, 0, 64) = ANY('$s1'::int[]) LIMIT 20")
[ -n "$hot" ] && [ "${#cold[@]}" = 20 ] || fail "keys: hot '$hot', ${#cold[@]} cold"
N=60000
psql -XAtq "$DATABASE_URL" -c "CALL burst('$hot', $N)" >/dev/null &
bp=$!
wait_until 30 "grep -q 'slot 1: cold' '$T_TMP/out.log'"
note "$(grep -m1 'slot 1: cold' "$T_TMP/out.log" | sed 's/.*slot 1/slot 1/')"
worst=0 during=0
for i in "${!cold[@]}"; do
	kill -0 "$bp" 2>/dev/null && during=$((during + 1))
	t0=$(date +%s%N)
	q "SELECT pgoutbox.send('cold', '${cold[$i]}', 'c$i', '{}')" >/dev/null
	wait_until 1 "grep -q '\"type\":\"c$i\"' '$T_TMP/out'"
	ms=$((($(date +%s%N) - t0) / 1000000))
	[ "$ms" -gt "$worst" ] && worst=$ms
done
note "20 events in the cold connection's shards, $during of them sent during the burst: the slowest arrived within ${worst} ms of its send (the poll: 60 s)"
[ "$during" -ge 10 ] || fail "only $during of 20 cold-shard events were sent while the lone producer ran: the test proves little"
wait "$bp" || fail "burst"
wait_until 30 "[ \$(grep -c '\"topic\":\"burst\"' '$T_TMP/out') = $N ]"
stop_relay "$RELAY_PID"
