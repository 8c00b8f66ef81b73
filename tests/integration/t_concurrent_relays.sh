# 3 relays draining 50,000 events at once, while producers add more: every
# id is delivered exactly once (no relay crashed, so no duplicate allowed).
. "$(dirname "$0")/../lib.sh"
t_db
q "INSERT INTO pgoutbox.outbox (topic, key, type, payload)
   SELECT 'load', 'k' || (i % 100), 'test', jsonb_build_object('i', i)
   FROM generate_series(1, 40000) i"
for r in 1 2 3; do
	start_relay "$T_TMP/out$r" --mode concurrent --sink stdout --batch 200 --name "r$r"
	eval "pid$r=$RELAY_PID"
done
# 10,000 more while the relays run, in 100 transactions.
for b in $(seq 100); do
	q "SELECT pgoutbox.send('load', 'k' || i, 'test', jsonb_build_object('late', i)) FROM generate_series(1, 100) i" >/dev/null
done
wait_until 120 '[ "$(pending)" = 0 ]'
sleep 0.3
for r in 1 2 3; do eval "stop_relay \$pid$r"; done
total=$(ids_of "$T_TMP"/out1 "$T_TMP"/out2 "$T_TMP"/out3 | wc -l)
distinct=$(ids_of "$T_TMP"/out1 "$T_TMP"/out2 "$T_TMP"/out3 | sort -u | wc -l)
[ "$distinct" = 50000 ] || fail "expected 50000 distinct ids, got $distinct"
[ "$total" = 50000 ] || fail "$((total - distinct)) duplicates among $total deliveries"
expect=$(q "SELECT count(*) FROM generate_series(1, 50000)")
[ "$(ids_of "$T_TMP"/out1 "$T_TMP"/out2 "$T_TMP"/out3 | sort -n | tail -1)" = "$expect" ] || fail "ids are not 1..50000"
for r in 1 2 3; do
	note "relay r$r delivered $(ids_of "$T_TMP/out$r" | wc -l)"
	[ "$(ids_of "$T_TMP/out$r" | wc -l)" -gt 0 ] || fail "relay r$r got no work: SKIP LOCKED did not spread it"
done
