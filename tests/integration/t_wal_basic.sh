# A queue captured through the WAL (docs/wal.md): the guard-rails and the
# sink's outage.
#  1. At wal_level replica, `queue create --capture wal` says how to fix it.
#  2. Rolled back (a transaction, a savepoint): nothing sent; the caps and
#     checks of the table path hold; ids from the queue's sequence.
#  3. The sink down (an exec command that is missing: unavailable): no
#     attempt spent, the slot's lag grows and shows (in the slot, in status,
#     and in bytes and seconds in /metrics); then the command
#     comes: everything delivered once, in order, and the lag drains.
#  4. The slot missing: the relay stops with a clear error.
#  5. queue drop removes the queue and its slot; refused while a relay
#     streams it.
#  6. A relay that could not read the capture at start stops once it can.
#  7. A queue of the same name in another database refuses the slot.
. "$(dirname "$0")/../lib.sh"
t_db
out=$("$PGO_BIN" queue create ev --capture wal 2>&1) && fail "capture wal at wal_level replica: created: $out"
grep -q 'wal_level = logical' <<<"$out" || fail "no wal_level fix in: $out"
[ "$(q "SELECT count(*) FROM pgoutbox.queues WHERE name = 'ev'")" = 0 ] || fail "a queue was left behind"

unset PG_PORT PG_DIR PG_URL PG_OPTS
pg_start "$T_TMP/pgwal" wal_level=logical max_replication_slots=4 max_wal_senders=4 fsync=off ||
	fail "cannot start a cluster with wal_level=logical"
trap 'cleanup_pids; pg_stop' EXIT
t_db
"$PGO_BIN" queue create ev --capture wal >/dev/null || fail "queue create --capture wal"
[ "$(q "SELECT capture FROM pgoutbox.queues WHERE name = 'ev'")" = wal ] || fail "capture not recorded"
# Slot names are the cluster's: the same queue in another database
# refuses the first one's slot, and leaves nothing behind.
main_url=$DATABASE_URL
t_db t_wal_basic_other
out=$("$PGO_BIN" queue create ev --capture wal 2>&1) && fail "a second database took the slot pgoutbox_ev: $out"
grep -q 'slot pgoutbox_ev exists already, for database t_wal_basic' <<<"$out" || fail "no clear error for another database's slot: $out"
[ "$(q "SELECT count(*) FROM pgoutbox.queues WHERE name = 'ev'")" = 0 ] || fail "the refused queue was left behind"
"$PGO_BIN" queue create ev2 --capture wal >/dev/null || fail "queue create ev2 --capture wal in a second database"
"$PGO_BIN" queue drop ev2 --yes >/dev/null || fail "queue drop ev2"
DATABASE_URL=$main_url
lag() { q "SELECT pg_current_wal_lsn() - confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'pgoutbox_ev'"; }

# 2. Rollbacks and checks.
q "BEGIN; SELECT pgoutbox.send_to('ev', 't', 'a', 'x', '{\"n\": 0}'); ROLLBACK;" >/dev/null
# Its transaction commits a second after it began: the events'
# created_at is the commit time, not the start (the message has none).
psql -XAtq -v ON_ERROR_STOP=1 "$DATABASE_URL" >"$T_TMP/tx.out" <<'SQL'
BEGIN;
SELECT 'start ' || extract(epoch FROM now());
SELECT pgoutbox.send_to('ev', 't', 'a', 'x', '{"n": 1}');
SAVEPOINT s;
SELECT pgoutbox.send_to('ev', 't', 'a', 'x', '{"n": 0}');
ROLLBACK TO s;
SELECT pgoutbox.send_batch_to('ev', 't', ARRAY['a', 'b'], ARRAY['x', 'x'], ARRAY['{"n": 2}', '{"n": 3}']::jsonb[]);
SELECT pg_sleep(1);
COMMIT;
SQL
tx_start=$(sed -n 's/^start //p' "$T_TMP/tx.out")
# The C producer (pgoutbox send) as a role that may INSERT into the
# queue's table: still a message, not a row nobody relays.
"$PGO_BIN" send --queue ev --topic t --key a --type x '{"n": 3}' >/dev/null || fail "pgoutbox send --queue ev"
[ "$(q "SELECT count(*) FROM pgoutbox.ev")" = 0 ] || fail "the C producer wrote a row into a WAL queue's table"
err=$(q "SELECT pgoutbox.send_to('ev', repeat('t', 300), 'a', 'x', '{}')" 2>&1) && fail "a 300-byte topic was sent"
grep -q 'event_topic' <<<"$err" || fail "the topic cap's error is not the table path's: $err"
err=$(q "SELECT pgoutbox.send_to('ev', 't', 'a', 'x', NULL)" 2>&1) && fail "a NULL payload was sent"
grep -q 'payload must not be NULL' <<<"$err" || fail "no payload check: $err"

# 3. The sink down, then up.
export PGOUTBOX_RELAY_RETRY_BASE=50ms PGOUTBOX_RELAY_RETRY_MAX=200ms
lag0=$(lag)
mport=$(pg_free_port)
PGOUTBOX_METRICS_LISTEN=127.0.0.1:$mport PGOUTBOX_METRICS_INTERVAL=1s \
	start_relay "$T_TMP/down.out" --queue ev --sink exec --exec "$T_TMP/sink.sh" --batch 50
q "SELECT pgoutbox.send_batch_to('ev', 't', array_agg('k' || (i % 7) ORDER BY i), array_agg('x'::text), array_agg(jsonb_build_object('n', 3 + i) ORDER BY i)) FROM generate_series(1, 300) i" >/dev/null
wait_until 20 'grep -q "unavailable" "$T_TMP/down.out.log"'
sleep 2
lag1=$(lag)
[ "$lag1" -gt "$lag0" ] || fail "the slot's lag did not grow while the sink was down ($lag0 -> $lag1)"
[ ! -s "$T_TMP/got" ] || fail "delivered while the sink was down"
metric() { curl -s "127.0.0.1:$mport/metrics" | grep "^pgoutbox_slot_lag_$1{" | awk '{ print int($2) }'; }
wait_until 10 '[ "$(metric bytes)" -gt 0 ] && [ "$(metric seconds)" -ge 1 ]'
note "sink down: /metrics shows slot lag $(metric bytes) bytes, $(metric seconds) s"
st=$("$PGO_BIN" status --queue ev --json | python3 -c 'import json, sys; s = json.load(sys.stdin)["slot"]; print(s["exists"], s["active"], s["lag_bytes"] > 0)')
[ "$st" = "True True True" ] || fail "status --json does not show the streamed slot's lag: $st"
"$PGO_BIN" status --queue ev | qgrep 'capture: wal, slot pgoutbox_ev streamed' || fail "status shows no slot: $("$PGO_BIN" status --queue ev)"
grep -q "retrying" "$T_TMP/down.out.log" && fail "an unavailable sink spent attempts: $(grep retrying "$T_TMP/down.out.log" | head -2)"
printf '#!/bin/sh\ncat >> "%s/got"\n' "$T_TMP" >"$T_TMP/sink.sh"
chmod +x "$T_TMP/sink.sh"
wait_until 30 '[ "$(ids_of "$T_TMP/got" 2>/dev/null | wc -l)" -ge 304 ]'
wait_until 20 '[ "$(lag)" -lt "$lag1" ]'
stop_relay "$RELAY_PID"
[ "$(ids_of "$T_TMP/got" | wc -l)" = 304 ] || fail "$(ids_of "$T_TMP/got" | wc -l) deliveries of 304 events"
grep -q '"n": 0' "$T_TMP/got" && fail "a rolled-back event was sent"
grep -o '"n": [0-9]*' "$T_TMP/got" | cut -d' ' -f2 | sort -n -c || fail "not in commit order"
grep -q '"attempts":0' "$T_TMP/got" || fail "no attempts field"
grep '"attempts":[1-9]' "$T_TMP/got" && fail "attempts spent on an unavailable sink"
ids_of "$T_TMP/got" | sed -n 1p | qgrep -x 2 || fail "the first id is not the sequence's 2 (the rolled back took 1): $(ids_of "$T_TMP/got" | head -3)"
# created_at: that transaction's commit time, for its single and batched
# events alike, in the table path's format.
python3 - "$T_TMP/got" "$tx_start" <<'PY' || fail "created_at is not the commit time"
import datetime, json, sys
start = float(sys.argv[2])
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e["payload"].get("n") in (1, 2, 3) and e["type"] == "x":
        at = datetime.datetime.strptime(e["created_at"], "%Y-%m-%dT%H:%M:%S.%fZ")
        at = at.replace(tzinfo=datetime.timezone.utc).timestamp()
        if not start + 1 <= at < start + 30:
            sys.exit(f"event {e['id']}: created_at {e['created_at']} is not after the commit (begun at {start})")
PY
note "sink down: slot lag $lag0 -> $lag1 bytes, then $(lag) after it came back"

# 4. No slot: a clear error.
q "SELECT pg_drop_replication_slot('pgoutbox_ev')" >/dev/null
rc=0
timeout 20 "$PGO_BIN" relay --queue ev --sink stdout >/dev/null 2>"$T_TMP/noslot.log" || rc=$?
[ "$rc" != 0 ] && [ "$rc" != 124 ] || fail "a relay without its slot did not stop with an error (exit $rc)"
grep -q 'replication slot pgoutbox_ev of queue ev is missing' "$T_TMP/noslot.log" || fail "no clear error: $(tail -2 "$T_TMP/noslot.log")"

# 5. queue drop: refused while a relay streams the slot, then it goes.
q "SELECT pg_create_logical_replication_slot('pgoutbox_ev', 'pgoutput')" >/dev/null
start_relay "$T_TMP/drop.out" --queue ev --sink stdout
wait_until 20 'grep -q "streaming slot" "$T_TMP/drop.out.log"'
"$PGO_BIN" queue drop ev >/dev/null 2>&1 && fail "queue drop without --yes dropped"
err=$("$PGO_BIN" queue drop ev --yes 2>&1) && fail "queue drop with a relay streaming: $err"
grep -q 'active' <<<"$err" || fail "no reason given: $err"
[ "$(q "SELECT count(*) FROM pgoutbox.queues WHERE name = 'ev'")" = 1 ] || fail "a refused drop dropped the queue"
stop_relay "$RELAY_PID"
"$PGO_BIN" queue drop ev --yes >/dev/null || fail "queue drop"
[ "$(q "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'pgoutbox_ev'")" = 0 ] || fail "the slot was left behind"
[ "$(q "SELECT count(*) FROM pgoutbox.queues WHERE name = 'ev'") $(q "SELECT to_regclass('pgoutbox.ev') IS NULL")" = "0 t" ] || fail "the queue was left behind"

# 6. A relay started while the database was unreachable could not read
# the queue's capture: once connected it stops and says to start it
# again, instead of claiming the WAL queue's empty table for ever.
"$PGO_BIN" queue create ev2 --capture wal >/dev/null || fail "queue create ev2"
pg_stop
PGOUTBOX_RELAY_RECONNECT_MAX=200ms start_relay "$T_TMP/blind.out" --queue ev2 --sink stdout
sleep 1
pg_start_again || fail "PostgreSQL did not start again"
wait_until 30 '! kill -0 "$RELAY_PID" 2>/dev/null'
rc=0; wait "$RELAY_PID" || rc=$?
[ "$rc" != 0 ] || fail "the blind relay exited 0"
grep -q 'is captured through the WAL.*start it again' "$T_TMP/blind.out.log" || fail "no clear reason: $(tail -3 "$T_TMP/blind.out.log")"
"$PGO_BIN" queue drop ev2 --yes >/dev/null || fail "queue drop ev2"
