# Least privilege, as documented in docs/security.md: a producer role can only
# send (not read or change the outbox), a relay role relays, retries and
# dead-letters without any access to business tables.
. "$(dirname "$0")/../lib.sh"
t_db
P=t_roles_producer R=t_roles_relay
# Roles are per cluster, and each test run starts a fresh cluster.
psql -XAtq -v ON_ERROR_STOP=1 "$DATABASE_URL" >/dev/null <<SQL
CREATE ROLE $P LOGIN;
GRANT USAGE ON SCHEMA pgoutbox TO $P;
GRANT EXECUTE ON FUNCTION pgoutbox.send(text, text, text, jsonb, jsonb) TO $P;
CREATE ROLE $R LOGIN;
GRANT USAGE ON SCHEMA pgoutbox TO $R;
GRANT SELECT ON pgoutbox.migrations TO $R;
GRANT SELECT, INSERT, UPDATE, DELETE ON pgoutbox.outbox TO $R;  -- UPDATE: FOR UPDATE
GRANT SELECT, INSERT, UPDATE ON pgoutbox.dead_letters TO $R;
GRANT SELECT ON pgoutbox.shard_leases TO $R;  -- ordered claims check their lease epochs
GRANT SELECT ON pgoutbox.relays, pgoutbox.queues TO $R;  -- pgoutbox status
GRANT EXECUTE ON FUNCTION pgoutbox.rebalance(text, text, text, interval),
                          pgoutbox.relay_beat(text, text, text, interval, boolean),
                          pgoutbox.leave(text, text),
                          pgoutbox.unarchive(text, bigint[]),
                          pgoutbox.claim_floor(text, bigint, bigint, text[]),
                          pgoutbox.maintain(), pgoutbox.health(interval, bigint) TO $R;
CREATE TABLE secrets (card text);
INSERT INTO secrets VALUES ('4111');
SQL
base=$DATABASE_URL
as() { psql -XAtq -v ON_ERROR_STOP=1 "${base/user=postgres/user=$1}" -c "$2"; }
as $P "SELECT pgoutbox.send('t', 'k', 'x', '{\"n\": 1}')" >/dev/null || fail "producer cannot send"
as $P "SELECT pgoutbox.send('t', 'k', 'x', '{\"n\": 2}')" >/dev/null
as $P "SELECT pgoutbox.send('t', 'k', 'x', '{\"n\": 3}')" >/dev/null
# The CLI (pgo_send) as the producer: through pgoutbox.send, in the
# producer's transaction like the SQL calls.
"$PGO_BIN" send --db "${base/user=postgres/user=$P}" --topic t --key k --type x '{"n": 4}' \
	>"$T_TMP/send.out" 2>"$T_TMP/send.err" || fail "pgoutbox send as the producer: $(cat "$T_TMP/send.err")"
"$PGO_BIN" send --db "${base/user=postgres/user=$P}" --topic t --key k --type x '{"n": 5}' >/dev/null 2>&1 ||
	fail "a second pgoutbox send as the producer"
[ "$(q "SELECT count(*) FROM pgoutbox.outbox WHERE payload->>'n' IN ('4', '5')")" = 2 ] || fail "the producer's CLI sends are not in the outbox"
q "DELETE FROM pgoutbox.outbox WHERE payload->>'n' IN ('4', '5')" >/dev/null
as $P "SELECT count(*) FROM pgoutbox.outbox" 2>/dev/null && fail "producer can read the outbox"
as $P "DELETE FROM pgoutbox.outbox" 2>/dev/null && fail "producer can delete from the outbox"
as $R "SELECT * FROM secrets" 2>/dev/null && fail "relay role can read business tables"
as $R "SELECT pgoutbox.send('t', 'k', 'x', '{}')" 2>/dev/null && fail "relay role can send"
# Relay as the relay role: event 1 acked, 2 retried then dead, 3 dead at once.
cat >"$T_TMP/sink.sh" <<'SH'
#!/bin/sh
cat >/dev/null
echo "retry 2 try later"
echo "dead 3 rejected"
SH
chmod +x "$T_TMP/sink.sh"
export DATABASE_URL=${base/user=postgres/user=$R}
start_relay "$T_TMP/out" --sink exec --exec "$T_TMP/sink.sh" --max-attempts 2
export DATABASE_URL=$base
wait_until 20 '[ "$(pending)" = 0 ]'
stop_relay "$RELAY_PID"
[ "$(q 'SELECT id FROM pgoutbox.dead_letters ORDER BY id' | tr '\n' ' ')" = "2 3 " ] || fail "dead letters: $(q 'SELECT * FROM pgoutbox.dead_letters')"
grep -q 'permission denied' "$T_TMP/out.log" && fail "relay hit a permission error: $(grep 'permission' "$T_TMP/out.log")"
# status as the relay role, with the documented grants.
"$PGO_BIN" status --db "${base/user=postgres/user=$R}" >"$T_TMP/status.out" 2>&1 || fail "status as the relay role: $(cat "$T_TMP/status.out")"
true
