# SIGTERM during a slow batch: the relay finishes the batch in flight (its
# events are acked and deleted), starts no new one, and exits 0.
. "$(dirname "$0")/../lib.sh"
t_db
q "INSERT INTO pgoutbox.outbox (topic, type, payload) SELECT 't', 'x', jsonb_build_object('i', i) FROM generate_series(1, 100) i"
start_relay "$T_TMP/out" --sink exec --exec "touch $T_TMP/started; sleep 1; cat >> $T_TMP/sunk" --batch 10 --in-flight 1
wait_until 10 "[ -f $T_TMP/started ]"   # the first batch is in flight
kill -TERM "$RELAY_PID"
t0=$SECONDS
rc=0; wait "$RELAY_PID" || rc=$?
[ "$rc" = 0 ] || fail "exit $rc after SIGTERM"
[ $((SECONDS - t0)) -le 3 ] || fail "took $((SECONDS - t0)) s to stop"
sunk=$(ids_of "$T_TMP/sunk" | wc -l)
[ "$sunk" = 10 ] || fail "expected the batch in flight (10) to finish, got $sunk"
[ "$(pending)" = 90 ] || fail "expected 90 pending, got $(pending)"
grep -q 'stopping: finishing the batches in flight' "$T_TMP/out.log" || fail "no stop message"
