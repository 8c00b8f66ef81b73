# Wake-up: a NOTIFY delivers an event within milliseconds; an event whose
# notification is lost (its trigger did not fire) waits only for the
# fallback poll, then arrives.
# serial: timing-sensitive, run alone (tests/run.sh)
. "$(dirname "$0")/../lib.sh"
t_db
start_relay "$T_TMP/out" --sink stdout --poll-interval 3s
wait_until 10 "grep -q starting '$T_TMP/out.log'"
sleep 0.5
# With a notification: fast.
t0=$(date +%s%N)
q "SELECT pgoutbox.send('t', NULL, 'notified', '{}')" >/dev/null
wait_until 5 "grep -q notified '$T_TMP/out'"
fast=$(( ($(date +%s%N) - t0) / 1000000 ))
note "with NOTIFY: delivered in ${fast} ms"
[ "$fast" -lt 1000 ] || fail "notified event took ${fast} ms"
# Lost notification: replica role skips the NOTIFY trigger.
sleep 3.5  # let a fallback poll pass, so the next is ~3 s away
t0=$(date +%s%N)
psql -XAtq -v ON_ERROR_STOP=1 "$DATABASE_URL" -c "SET session_replication_role = replica" \
	-c "INSERT INTO pgoutbox.outbox (topic, type, payload) VALUES ('t', 'silent', '{}')" >/dev/null
sleep 0.5
grep -q silent "$T_TMP/out" && fail "an event without notification arrived at once: the test proves nothing"
wait_until 6 "grep -q silent '$T_TMP/out'"
slow=$(( ($(date +%s%N) - t0) / 1000000 ))
note "lost notification: delivered by the fallback poll in ${slow} ms"
stop_relay "$RELAY_PID"
