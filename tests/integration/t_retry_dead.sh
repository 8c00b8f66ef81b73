# A sink failure rolls the batch back: attempts, the error and a later
# run_at (exponential backoff with jitter) are recorded; after max attempts
# the event moves to dead letters with its last error.  Per-event verdicts
# from the exec sink fail only the events named.
. "$(dirname "$0")/../lib.sh"
t_db
q "INSERT INTO pgoutbox.outbox (topic, key, type, payload) SELECT 't', 'k' || i, 'x', jsonb_build_object('i', i) FROM generate_series(1, 5) i"
# Event 3 is rejected for good, event 2 fails until it runs out of attempts,
# the others are accepted.
cat >"$T_TMP/sink.sh" <<SH
#!/bin/sh
input=\$(cat)
echo "\$input" >> $T_TMP/sunk
echo "dead 3 schema mismatch in payload"
echo "retry 2 downstream said 503"
exit 0
SH
chmod +x "$T_TMP/sink.sh"
start_relay "$T_TMP/out" --sink exec --exec "$T_TMP/sink.sh" --max-attempts 3 \
	--poll-interval 100ms --log-level info
wait_until 30 '[ "$(pending)" = 0 ]'
stop_relay "$RELAY_PID"
[ "$(q "SELECT count(*) FROM pgoutbox.dead_letters")" = 2 ] || fail "expected 2 dead letters: $(q 'SELECT * FROM pgoutbox.dead_letters')"
row=$(q "SELECT id, attempts, last_error FROM pgoutbox.dead_letters WHERE id = 3")
[ "$row" = "3|1|schema mismatch in payload" ] || fail "dead letter 3: $row"
row=$(q "SELECT id, attempts, last_error, payload FROM pgoutbox.dead_letters WHERE id = 2")
[ "$row" = '2|3|downstream said 503|{"i": 2}' ] || fail "dead letter 2: $row"
# Event 2 was delivered 3 times (attempts), the accepted ones once each.
[ "$(ids_of "$T_TMP/sunk" | grep -c '^2$')" = 3 ] || fail "event 2 delivered $(ids_of "$T_TMP/sunk" | grep -c '^2$') times, want 3"
for i in 1 4 5; do
	[ "$(ids_of "$T_TMP/sunk" | grep -c "^$i\$")" = 1 ] || fail "event $i delivered more than once"
done
grep -q 'dead-lettered' "$T_TMP/out.log" || fail "no warning about dead letters in the log"

# Backoff is recorded in run_at: a failing batch command.  The relay is
# up first, so the event is claimed at once (its NOTIFY) and its retry is
# due 0.5-1 s (retry_base 1 s, jittered) after it was sent, however long
# the checks below take on a loaded machine.
start_relay "$T_TMP/out2" --sink exec --exec 'echo broken pipe to the moon >&2; exit 7' \
	--max-attempts 10
wait_until 20 'grep -q "owns" "$T_TMP/out2.log"'
q "INSERT INTO pgoutbox.outbox (topic, type, payload) VALUES ('t', 'x', '{}')"
wait_until 10 "[ \"\$(q 'SELECT attempts FROM pgoutbox.outbox')\" = 1 ]"
row=$(q "SELECT attempts, last_error, run_at - created_at >= interval '450 ms', run_at - created_at < interval '1500 ms' FROM pgoutbox.outbox")
stop_relay "$RELAY_PID"
[ "$row" = "1|exec: exit status 7: broken pipe to the moon|t|t" ] || fail "after one failure (attempts, error, retry due 0.45-1.5 s after the send): $row"

# Exit 0 acks only what the command read (issue 19, item 5): 5 MB of input,
# a command that reads 10 bytes and exits 0 publishes nothing.
q "DELETE FROM pgoutbox.outbox"
q "INSERT INTO pgoutbox.outbox (topic, type, payload) SELECT 'big', 'x', jsonb_build_object('pad', repeat('x', 1000)) FROM generate_series(1, 5000)"
start_relay "$T_TMP/out3" --sink exec --exec 'head -c 10 >/dev/null; exit 0' \
	--max-attempts 10 --batch 5000
wait_until 30 "[ \"\$(q 'SELECT count(*) FROM pgoutbox.outbox WHERE attempts >= 1')\" = 5000 ]"
err=$(q "SELECT DISTINCT last_error FROM pgoutbox.outbox")
stop_relay "$RELAY_PID"
[ "$(pending)" = 5000 ] || fail "exit 0 after reading 10 bytes of 5 MB: published $((5000 - $(pending)))"
[[ "$err" == "exec: exit status 0, but the command left "*" bytes of its input unread" ]] || fail "last_error: $err"
