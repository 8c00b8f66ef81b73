# Fencing: a relay that loses its leases while a batch is in flight (its
# sessions are terminated, as a network cut or an admin would) cannot
# delete that batch's rows once another relay has taken the shards: the new
# owner delivers every event, in order, and the old relay's late COMMIT
# fails.  The claim also checks each lease's epoch (by shard), so a
# stale epoch claims nothing.
. "$(dirname "$0")/../lib.sh"
t_db
q "SELECT pgoutbox.send('t', 'key-' || (i % 10), 'x', jsonb_build_object('i', i)) FROM generate_series(1, 200) i" >/dev/null
start_relay "$T_TMP/a" --mode ordered --in-flight 1 --batch 50 --name old \
	--sink exec --exec "touch $T_TMP/started; sleep 3; cat >> $T_TMP/a.out"
A=$RELAY_PID
wait_until 10 "[ -f $T_TMP/started ]"
# The batch is in flight: freeze the old relay (its sink command goes on)
# and cut its sessions, as a network partition would.
kill -STOP "$A"
q "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'pgoutbox relay old'" >/dev/null
start_relay "$T_TMP/b" --mode ordered --in-flight 1 --batch 50 --name new --sink stdout
B=$RELAY_PID
wait_until 20 '[ "$(pending)" = 0 ]'
# The old relay wakes up with its batch published; its COMMIT cannot
# succeed.
wait_until 10 "[ -s $T_TMP/a.out ]"
kill -CONT "$A"
wait_until 10 "grep -q 'will be sent again' '$T_TMP/a.log'"
stop_relay "$A"
[ "$(pending)" = 0 ] || fail "the old relay put events back after the new owner drained them"
stop_relay "$B"
[ "$(ids_of "$T_TMP/b" | sort -u | wc -l)" = 200 ] || fail "new owner delivered $(ids_of "$T_TMP/b" | sort -u | wc -l) of 200"
[ "$(ids_of "$T_TMP/b" | sort -n | uniq -d | wc -l)" = 0 ] || fail "new owner delivered duplicates"
ids_of "$T_TMP/b" >"$T_TMP/b.ids"
sort -n "$T_TMP/b.ids" | cmp -s - "$T_TMP/b.ids" || fail "new owner delivered out of order"
note "old relay's sink wrote $(ids_of "$T_TMP/a.out" 2>/dev/null | wc -l) events it could not commit; the new owner delivered all 200"
# A stale epoch claims nothing: the claim's lease check, run by hand.
t_db t_ordered_fencing_sql
q "SELECT pgoutbox.send('t', 'k', 'x', '{}')" >/dev/null
out=$(psql -XAtq -v ON_ERROR_STOP=1 "$DATABASE_URL" <<'SQL'
SELECT count(*) FROM pgoutbox.rebalance('outbox', 'tester/0', 'ordered');
UPDATE pgoutbox.shard_leases SET epoch = epoch + 1 WHERE queue = 'outbox';  -- taken over
SELECT count(*) FROM pgoutbox.shard_leases l
  JOIN unnest(ARRAY(SELECT generate_series(0, 63)), ARRAY(SELECT 1::bigint FROM generate_series(0, 63))) AS m(shard, epoch)
    ON l.shard = m.shard AND l.epoch = m.epoch
 WHERE l.queue = 'outbox';
SQL
)
[ "$out" = "$(printf '64\n0')" ] || fail "lease epochs: $out"
