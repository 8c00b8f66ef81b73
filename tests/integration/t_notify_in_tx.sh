# Wake-up during a batch: an event committed while the relay's only
# connection holds a claim transaction open is notified to that session
# at its COMMIT, in the same read as the settle round's results.  It must
# start the next claim at once, not wait for the fallback poll (a minute
# here).  libpq parses such a notification while the round's results are
# read; the connection must take it then.  The claim is made slow (half a
# second per row, through the adopted table's --type), the sink is stdout,
# which wakes the loop for nothing.
. "$(dirname "$0")/../lib.sh"
t_db
q "CREATE TABLE outbox (id bigserial PRIMARY KEY, aggregatetype text, aggregateid text, type text, payload jsonb)"
q "CREATE FUNCTION slow(t text) RETURNS text LANGUAGE sql AS \$\$ SELECT t FROM pg_sleep(0.5) \$\$"
"$PGO_BIN" adopt public.outbox --name slow --type "slow(type)" --shards 0 >"$T_TMP/adopt" 2>&1 || fail "adopt: $(cat "$T_TMP/adopt")"
start_relay "$T_TMP/out" --queue slow --sink stdout --in-flight 1 --poll-interval 60s --mode concurrent
wait_until 10 "grep -q starting '$T_TMP/out.log'"
q "INSERT INTO outbox (aggregatetype, type, payload) VALUES ('t', 'first', '{}')"
# The claim of the first takes half a second: this one commits meanwhile.
t0=$(date +%s%N)
q "INSERT INTO outbox (aggregatetype, type, payload) VALUES ('t', 'second', '{}')"
wait_until 30 "grep -q second '$T_TMP/out'"
ms=$((($(date +%s%N) - t0) / 1000000))
note "an event committed during a claim arrived after $ms ms (poll interval 60 s)"
grep -q first "$T_TMP/out" || fail "the first event is missing"
[ "$(grep -c '"type":"second"' "$T_TMP/out")" = 1 ] || fail "second: not once"
[ "$ms" -lt 5000 ] || fail "the wake-up of an event committed during a claim was lost: $ms ms"
stop_relay "$RELAY_PID"
