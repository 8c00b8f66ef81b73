# A Debezium-style outbox adopted with capture wal (docs/adopt.md): the
# producers INSERT the row and DELETE it in the same transaction, so only
# the WAL has the event.
#  1. At wal_level replica, `adopt --capture wal` says how to fix it;
#     --done with --capture wal is refused; an adopt that fails after
#     making its slot (a lock timeout) drops it again.
#  2. adopt makes the slot and publishes the table's inserts; rows
#     committed before it are not events; the table's replica identity
#     (NOTHING) does not matter.
#  3. 4 producers (a transaction in ten rolled back), 3 relays, one killed
#     -9 every second: every committed row delivered with the mapped fields
#     (topic, key, type, payload, the uuid as the outbox_id header,
#     created_at), none of a rolled-back transaction, per key in commit
#     order, and the table stays empty.
#     A dead letter (its row deleted) is sent again by `dead retry`.
#  4. A TOASTed payload (320 kB, stored out of line) arrives whole; a
#     column added meanwhile changes nothing.
#  5. A mapped column renamed: the relay stops, saying the map no longer
#     fits; renamed back, the row written meanwhile stops it too (its
#     column is gone), rather than go out with a NULL topic.
#  6. unadopt removes the slot and the table from the publication.
. "$(dirname "$0")/../lib.sh"
TABLE_SQL="CREATE TABLE public.outbox (id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    aggregatetype text NOT NULL, aggregateid text NOT NULL, type text NOT NULL,
    payload jsonb, created_at timestamptz NOT NULL DEFAULT clock_timestamp())"
t_db
q "$TABLE_SQL"
out=$("$PGO_BIN" adopt public.outbox --name orders --capture wal 2>&1) &&
	fail "capture wal at wal_level replica: adopted: $out"
grep -q 'wal_level = logical' <<<"$out" || fail "no wal_level fix in: $out"
[ "$(q "SELECT count(*) FROM pgoutbox.adopted")" = 0 ] || fail "an adoption was left behind"

unset PG_PORT PG_DIR PG_URL PG_OPTS
pg_start "$T_TMP/pgwal" wal_level=logical max_replication_slots=8 max_wal_senders=8 fsync=off ||
	fail "cannot start a cluster with wal_level=logical"
trap 'cleanup_pids; pg_stop' EXIT
t_db
q "$TABLE_SQL"
rc=0
out=$("$PGO_BIN" adopt public.outbox --name orders --capture wal --done 'type = null' 2>&1) || rc=$?
[ "$rc" = 2 ] && grep -q 'do not apply' <<<"$out" || fail "--done with --capture wal: exit $rc: $out"

# A slot is not transactional: adopt failing after it made it (its lock
# on the table timed out) drops it again.
PGAPPNAME=locker psql -XAtq "$DATABASE_URL" -c "BEGIN; LOCK TABLE outbox IN ROW EXCLUSIVE MODE; SELECT pg_sleep(60)" >/dev/null 2>&1 &
locker=$!; PIDS+=("$locker")
wait_until 10 '[ "$(q "SELECT count(*) FROM pg_locks WHERE relation = '"'outbox'"'::regclass AND mode = '"'RowExclusiveLock'"'")" = 1 ]'
rc=0
out=$(PGOPTIONS='-c lock_timeout=300' "$PGO_BIN" adopt public.outbox --name orders --capture wal 2>&1) || rc=$?
q "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'locker'" >/dev/null
wait "$locker" 2>/dev/null || true
[ "$rc" != 0 ] && grep -q 'lock timeout' <<<"$out" || fail "adopt under a lock: exit $rc: $out"
[ "$(q "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'pgoutbox_orders'")" = 0 ] ||
	fail "a failed adopt left its slot"

# 2. A row committed before adopt is not an event.
q "INSERT INTO outbox (aggregatetype, aggregateid, type, payload) VALUES ('agg', 'before', 'x', '{}')"
out=$("$PGO_BIN" adopt public.outbox --name orders --capture wal --created-at created_at) ||
	fail "adopt --capture wal"
grep -q 'replication slot pgoutbox_orders' <<<"$out" || fail "no slot in: $out"
[ "$(q "SELECT count(*) FROM pg_publication_tables WHERE pubname = 'pgoutbox_wal' AND tablename = 'outbox'")" = 1 ] ||
	fail "the table is not published"
q "DELETE FROM outbox"
# Only inserts are published: a table without a replica identity still
# takes its producers' deletes.
q "ALTER TABLE outbox REPLICA IDENTITY NOTHING"

psql -XAtq -v ON_ERROR_STOP=1 "$DATABASE_URL" >/dev/null <<'SQL'
CREATE TABLE agg (key text PRIMARY KEY, version int NOT NULL DEFAULT 0);
INSERT INTO agg (key) SELECT 'k' || i FROM generate_series(1, 50) i;
CREATE TABLE sent (id bigint PRIMARY KEY, uuid uuid, key text, v int, created_at timestamptz);
-- Debezium's pattern: the event's row inserted and deleted in the
-- transaction that makes it.  Each bumps its key's version (writers of a
-- key are serialized by the row lock: versions follow commit order);
-- one transaction in ten rolls back.
CREATE PROCEDURE produce(seconds float8) LANGUAGE plpgsql AS $$
DECLARE
    k text;
    v int;
    r record;
    stop timestamptz := clock_timestamp() + seconds * interval '1 second';
BEGIN
    WHILE clock_timestamp() < stop LOOP
        k := 'k' || (1 + floor(random() * 50))::int;
        UPDATE agg SET version = version + 1 WHERE key = k RETURNING version INTO v;
        INSERT INTO outbox (aggregatetype, aggregateid, type, payload)
        VALUES ('agg', k, 'agg.changed', jsonb_build_object('v', v))
        RETURNING pgoutbox_seq, id, created_at INTO r;
        DELETE FROM outbox WHERE id = r.id;
        INSERT INTO sent VALUES (r.pgoutbox_seq, r.id, k, v, r.created_at);
        IF random() < 0.1 THEN
            ROLLBACK;
        ELSE
            COMMIT;
        END IF;
        PERFORM pg_sleep(0.002);
    END LOOP;
END $$;
SQL
export PGOUTBOX_RELAY_RECONNECT_MAX=200ms
relays=()
n=0
start_one() {
	n=$((n + 1))
	# A sink slower than the producers, so that a killed relay held
	# events it had read and not delivered.
	printf '#!/bin/sh\nsleep 0.02\ncat >> "%s/r%s.out"\n' "$T_TMP" "$n" >"$T_TMP/r$n.sh"
	chmod +x "$T_TMP/r$n.sh"
	start_relay "$T_TMP/r$n.log" --queue orders --sink exec --exec "$T_TMP/r$n.sh" --batch 20
	relays+=("$RELAY_PID")
}
start_one; start_one; start_one

# 3. kill -9 of a relay every second for 8 s while 4 producers write.
prods=()
for _ in 1 2 3 4; do
	psql -XAtq -v ON_ERROR_STOP=1 "$DATABASE_URL" -c "CALL produce(8)" >/dev/null 2>>"$T_TMP/producer.log" &
	prods+=("$!"); PIDS+=("$!")
done
kills=0
for _ in $(seq 1 8); do
	sleep 1
	victim=${relays[0]}
	kill -9 "$victim" 2>/dev/null && kills=$((kills + 1))
	wait "$victim" 2>/dev/null || true
	relays=("${relays[@]:1}")
	start_one
done
for p in "${prods[@]}"; do wait "$p" || fail "a producer failed: $(cat "$T_TMP/producer.log")"; done
total=$(q "SELECT count(*) FROM sent")
[ "$total" -gt 500 ] || fail "only $total events committed: nothing tested"
q "SELECT id FROM sent" | sort >"$T_TMP/want"
wait_until 60 '[ "$(ids_of "$T_TMP"/r*.out | sort -u | comm -13 - "$T_TMP/want" | wc -l)" = 0 ]'
sleep 0.5
got=$(ids_of "$T_TMP"/r*.out | sort -u | wc -l)
extra=$(ids_of "$T_TMP"/r*.out | sort -u | comm -23 - "$T_TMP/want" | wc -l)
[ "$extra" = 0 ] || fail "$extra delivered events were never committed (rolled back, or from before adopt)"
[ "$got" = "$total" ] || fail "$got of $total committed events delivered"
[ "$(q "SELECT count(*) FROM outbox")" = 0 ] || fail "the table is not empty"
# The mapped fields, event by event, against what the producers committed.
cat "$T_TMP"/r*.out | python3 -c '
import json, sys
seen = {}
for line in sys.stdin:
    e = json.loads(line)
    seen[e["id"]] = e
for row in open(sys.argv[1]):
    i, uuid, key, v, created = row.rstrip("\n").split("|")
    e = seen[int(i)]
    want = {"topic": "agg", "key": key, "type": "agg.changed", "payload": {"v": int(v)},
            "headers": {"outbox_id": uuid}, "created_at": created}
    for f, x in want.items():
        if e[f] != x:
            sys.exit("event %s: %s is %r, not %r" % (i, f, e[f], x))
' <(q "SELECT id, uuid, key, v, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') FROM sent") ||
	fail "an event's fields are not the row's"
# Per key, each relay's output in commit order (after its first
# delivery of each event: a stream lost mid-batch sends again what it
# had not confirmed).
for f in "$T_TMP"/r*.out; do
	[ -s "$f" ] || continue
	grep -o '"key":"k[0-9]*".*"payload":{"v": [0-9]*}' "$f" |
		sed 's/"key":"\(k[0-9]*\)".*"v": \([0-9]*\)}/\1 \2/' | awk '!seen[$0]++' |
		awk -v f="$(basename "$f")" '{ if (($1 in last) && $2 <= last[$1]) { print f ": key " $1 " version " $2 " after " last[$1]; bad = 1 } last[$1] = $2 } END { exit bad }' ||
		fail "per-key order broken"
done
dups=$(( $(ids_of "$T_TMP"/r*.out | wc -l) - got ))
st=$("$PGO_BIN" status --queue orders) || fail "status: $st"
grep -q 'capture: wal, slot pgoutbox_orders' <<<"$st" && grep -q 'pending: none' <<<"$st" &&
	grep -q "retention: none (capture wal" <<<"$st" || fail "status: $st"
note "kill -9: $total committed, all delivered with their fields, in per-key order; $kills relays killed, $dups duplicates; the table stays empty"

# A dead letter: its row is gone, so `dead retry` sends it again as a
# logical message, which the relay delivers with its id.
for p in "${relays[@]}"; do stop_relay "$p"; done
printf '#!/bin/sh\ncat >/dev/null\nexit 1\n' >"$T_TMP/reject.sh"
chmod +x "$T_TMP/reject.sh"
start_relay "$T_TMP/reject.out" --queue orders --sink exec --exec "$T_TMP/reject.sh" --max-attempts 1
q "BEGIN; INSERT INTO outbox (aggregatetype, aggregateid, type, payload) VALUES ('agg', 'dead', 'x', '{\"d\": 1}'); DELETE FROM outbox; COMMIT"
wait_until 30 '[ "$(q "SELECT count(*) FROM pgoutbox.dead_letters WHERE queue = '"'orders'"' AND key = '"'dead'"'")" = 1 ]'
stop_relay "$RELAY_PID"
dead_id=$(q "SELECT id FROM pgoutbox.dead_letters WHERE queue = 'orders'")
"$PGO_BIN" dead retry --queue orders --all >/dev/null || fail "dead retry"
relays=()
start_one
wait_until 30 'grep -q "^{\"id\":$dead_id,.*\"key\":\"dead\".*\"payload\":{\"d\": 1}" "$T_TMP"/r*.out'
note "a dead letter (event $dead_id, its row deleted) sent again by dead retry"

# 4. A TOASTed payload (320 kB of md5 text) inserted and deleted; then a
# column added, and a row with it.
q "BEGIN; INSERT INTO outbox (aggregatetype, aggregateid, type, payload)
   SELECT 'agg', 'big', 'big', jsonb_build_object('blob', string_agg(md5(random()::text), '')) FROM generate_series(1, 10000);
   INSERT INTO sent (id, key) SELECT pgoutbox_seq, 'big' FROM outbox WHERE aggregateid = 'big';
   SELECT pg_column_size(payload) > 2000 FROM outbox WHERE aggregateid = 'big';
   DELETE FROM outbox; COMMIT" >"$T_TMP/toasted"
grep -qx t "$T_TMP/toasted" || fail "the big payload is not TOASTed: $(cat "$T_TMP/toasted")"
q "ALTER TABLE outbox ADD COLUMN tenant text"
q "BEGIN; INSERT INTO outbox (aggregatetype, aggregateid, type, payload, tenant) VALUES ('agg', 'after', 'later', '{\"x\": 1}', 't1'); DELETE FROM outbox; COMMIT"
wait_until 30 'grep -q "\"key\":\"after\"" "$T_TMP"/r*.out'
big=$(grep -h '"key":"big"' "$T_TMP"/r*.out | sed -n 1p | python3 -c 'import json,sys; print(len(json.loads(sys.stdin.read())["payload"]["blob"]))')
[ "$big" = 320000 ] || fail "the TOASTed payload arrived with $big characters, not 320000"
grep -h '"key":"after"' "$T_TMP"/r*.out | sed -n 1p | qgrep '"type":"later","payload":{"x": 1}' ||
	fail "the row after ADD COLUMN: $(grep -h '"key":"after"' "$T_TMP"/r*.out)"

# 5. A mapped column renamed: the relay stops and says so.
q "ALTER TABLE outbox RENAME COLUMN aggregatetype TO kind"
q "BEGIN; INSERT INTO outbox (kind, aggregateid, type, payload) VALUES ('agg', 'renamed', 'x', '{}'); DELETE FROM outbox; COMMIT"
wait_until 30 'grep -q "does not fit" "$T_TMP"/r*.log'
for p in "${relays[@]}"; do
	kill -TERM "$p" 2>/dev/null || true
	wait "$p" 2>/dev/null || true
done
grep -q '"key":"renamed"' "$T_TMP"/r*.out && fail "an event of a map that does not fit was sent"
# Renamed back, the map fits again, but that row was written with the
# column "kind", which the table has no more: not sent with a NULL topic.
q "ALTER TABLE outbox RENAME COLUMN kind TO aggregatetype"
start_relay "$T_TMP/back.out" --queue orders --sink exec --exec "$T_TMP/r1.sh"
wait_until 30 'grep -q "columns the table has no more (kind" "$T_TMP/back.out.log"'
wait "$RELAY_PID" 2>/dev/null || true
grep -q '"key":"renamed"' "$T_TMP"/r*.out && fail "a row of a column renamed since was sent"

# 6. unadopt: the slot and the table's place in the publication go.
"$PGO_BIN" unadopt orders >/dev/null || fail "unadopt"
[ "$(q "SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'pgoutbox_orders'")" = 0 ] ||
	fail "unadopt left the slot"
[ "$(q "SELECT count(*) FROM pg_publication_tables WHERE pubname = 'pgoutbox_wal'")" = 0 ] ||
	fail "unadopt left the table in the publication"
[ "$(q "SELECT count(*) FROM information_schema.columns WHERE table_name = 'outbox' AND column_name = 'pgoutbox_seq'")" = 0 ] ||
	fail "unadopt left pgoutbox_seq"
