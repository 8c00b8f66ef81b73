# Retention.  Archive mode: relayed events are kept in day partitions with
# their publication time, searchable by id, key and topic; events that fail
# are not archived; a partition past retention is dropped by `maintain`
# while a relay runs, with nothing lost or relayed twice.  `maintain` from
# 3 instances at once: one does the work, none fails.  Health: a held
# transaction is reported.  Delete mode (the default) keeps nothing.
. "$(dirname "$0")/../lib.sh"
t_db
"$PGO_BIN" maintain --retention archive --days 3 >"$T_TMP/set" || fail "set retention: $(cat "$T_TMP/set")"
grep -q 'retention archive, 3 days' "$T_TMP/set" || fail "$(cat "$T_TMP/set")"
parts=$(q "SELECT count(*) FROM pg_inherits WHERE inhparent = 'pgoutbox.outbox_archive'::regclass")
[ "$parts" = 4 ] || fail "expected 4 day partitions (yesterday to +2), found $parts"
q "SELECT pgoutbox.send('orders', 'o-' || (i % 50), 'order.created', jsonb_build_object('i', i)) FROM generate_series(1, 2000) i" >/dev/null
# Event 7 fails once (retried), event 9 is dead-lettered.
cat >"$T_TMP/sink.sh" <<SH
#!/bin/sh
cat >> $T_TMP/sunk
[ -f $T_TMP/retried ] || { touch $T_TMP/retried; echo "retry 7 not now"; }
echo "dead 9 malformed"
SH
chmod +x "$T_TMP/sink.sh"
start_relay "$T_TMP/out" --sink exec --exec "$T_TMP/sink.sh" --batch 300 --poll-interval 200ms
wait_until 30 '[ "$(pending)" = 0 ]'
# An old partition, as if the archive had run for years (the relay ran
# its own maintenance at start, before this existed).
q "CREATE TABLE pgoutbox.outbox_archive_20200101 PARTITION OF pgoutbox.outbox_archive FOR VALUES FROM ('2020-01-01 00:00:00+00') TO ('2020-01-02 00:00:00+00')"
q "INSERT INTO pgoutbox.outbox_archive VALUES (0, 't', 'k', 'x', '{}', '{}', '2020-01-01 10:00+00', 0, '2020-01-01 10:00+00')"
# maintain while the relay runs: drops the 2020 partition.
"$PGO_BIN" maintain >"$T_TMP/m1" || fail "maintain: $(cat "$T_TMP/m1")"
grep -q 'dropped 1' "$T_TMP/m1" || fail "maintain did not drop the old partition: $(cat "$T_TMP/m1")"
q "SELECT pgoutbox.send('orders', 'late', 'order.created', '{}')" >/dev/null
wait_until 10 '[ "$(pending)" = 0 ]'
stop_relay "$RELAY_PID"
[ "$(q 'SELECT count(*) FROM pgoutbox.outbox_archive')" = 2000 ] || fail "archive holds $(q 'SELECT count(*) FROM pgoutbox.outbox_archive'), want 2000 (2001 sent, 1 dead)"
[ "$(q 'SELECT count(DISTINCT id) FROM pgoutbox.outbox_archive')" = 2000 ] || fail "an event is archived twice"
[ "$(q 'SELECT count(*) FROM pgoutbox.outbox_archive WHERE id = 9')" = 0 ] || fail "the dead-lettered event is in the archive"
[ "$(q 'SELECT attempts FROM pgoutbox.outbox_archive WHERE id = 7')" = 1 ] || fail "the retried event: $(q 'SELECT * FROM pgoutbox.outbox_archive WHERE id = 7')"
[ "$(q "SELECT count(*) FROM pgoutbox.outbox_archive WHERE key = 'o-3' AND topic = 'orders' AND published_at > now() - interval '1 minute'")" = 40 ] || fail "search by key/topic/time"
plan=$(q "EXPLAIN SELECT * FROM pgoutbox.outbox_archive WHERE id = 42")
grep -q 'Index' <<<"$plan" || fail "no index by id: $plan"
[ "$(q 'SELECT count(*) FROM pgoutbox.dead_letters')" = 1 ] || fail "dead letters"
[ "$(ids_of "$T_TMP/sunk" | sort -u | wc -l)" = 2001 ] || fail "sink got $(ids_of "$T_TMP/sunk" | sort -u | wc -l) distinct events"

# Three maintain runs at once: one does the work, the others say so, none fails.
mp=()
for i in 1 2 3; do
	psql -XAtq "$DATABASE_URL" -c "BEGIN; SELECT done FROM pgoutbox.maintain(); SELECT pg_sleep(2); COMMIT;" >"$T_TMP/c$i" 2>&1 & mp+=($!)
done
for p in "${mp[@]}"; do wait "$p" || fail "a concurrent maintain failed: $(cat "$T_TMP"/c*)"; done
[ "$(cat "$T_TMP"/c* | grep -cx t)" = 1 ] || fail "concurrent maintain: $(cat "$T_TMP"/c*)"

# Health: a transaction held open is reported by maintain --health.
psql -XAtq "$DATABASE_URL" -c "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM pgoutbox.outbox; SELECT pg_sleep(10); COMMIT;" >/dev/null &
holder=$!
wait_until 10 '[ "$(q "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '"'%pg_sleep(10)%'"' AND backend_xmin IS NOT NULL AND xact_start < now() - interval '"'1.2 s'"'")" = 1 ]'
psql -XAtq "$DATABASE_URL" -c "SELECT kind, detail FROM pgoutbox.health('1 second')" >"$T_TMP/health"
grep -q 'xmin.*holds back vacuum' "$T_TMP/health" || fail "health did not report the held transaction: $(cat "$T_TMP/health")"
"$PGO_BIN" status >"$T_TMP/status"
grep -q 'retention: archive, 3 days' "$T_TMP/status" || fail "status: $(cat "$T_TMP/status")"
q "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(10)%' AND pid <> pg_backend_pid()" >/dev/null
wait "$holder" 2>/dev/null || true
note "health: $(head -1 "$T_TMP/health")"

# Delete mode keeps nothing.
"$PGO_BIN" maintain --retention delete >/dev/null
q "SELECT pgoutbox.send('orders', 'x', 'x', '{}')" >/dev/null
before=$(q 'SELECT count(*) FROM pgoutbox.outbox_archive')
start_relay "$T_TMP/out2" --sink stdout
wait_until 10 '[ "$(pending)" = 0 ]'
stop_relay "$RELAY_PID"
[ "$(q 'SELECT count(*) FROM pgoutbox.outbox_archive')" = "$before" ] || fail "delete mode archived"
