# A queue captured through the WAL (docs/wal.md), under fire: 3 relays on
# it, one of them killed -9 every second while 4 producers write, then
# PostgreSQL restarted mid-stream.  Every committed event is
# delivered, nothing of a rolled-back transaction is, each relay's output
# keeps every key's order, and the duplicates are only what a killed
# relay had not confirmed (at most a batch per kill; a restart of
# PostgreSQL before 17 sends again what it confirmed since the slot was
# last saved).  Runs its own cluster with wal_level = logical.
. "$(dirname "$0")/../lib.sh"
unset PG_PORT PG_DIR PG_URL PG_OPTS
pg_start "$T_TMP/pgwal" wal_level=logical max_replication_slots=8 max_wal_senders=8 fsync=off ||
	fail "cannot start a cluster with wal_level=logical"
trap 'cleanup_pids; pg_stop' EXIT
t_db
"$PGO_BIN" queue create ev --capture wal >/dev/null || fail "queue create --capture wal"
psql -XAtq -v ON_ERROR_STOP=1 "$DATABASE_URL" >/dev/null <<'SQL'
CREATE TABLE agg (key text PRIMARY KEY, version int NOT NULL DEFAULT 0);
INSERT INTO agg (key) SELECT 'k' || i FROM generate_series(1, 50) i;
CREATE TABLE sent (id bigint PRIMARY KEY, key text, v int);
-- Each event bumps its key's version in its transaction (writers of a key
-- are serialized by the row lock, so versions follow commit order) and
-- records its id; one transaction in ten rolls back.
CREATE PROCEDURE produce(seconds float8) LANGUAGE plpgsql AS $$
DECLARE
    k text;
    v int;
    i bigint;
    stop timestamptz := clock_timestamp() + seconds * interval '1 second';
BEGIN
    WHILE clock_timestamp() < stop LOOP
        k := 'k' || (1 + floor(random() * 50))::int;
        UPDATE agg SET version = version + 1 WHERE key = k RETURNING version INTO v;
        i := pgoutbox.send_to('ev', 'agg', k, 'agg.changed', jsonb_build_object('v', v));
        INSERT INTO sent VALUES (i, k, v);
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
	# A sink slower than the producers, so that a relay holds events it
	# read and has not delivered when it is killed: each relay's own
	# command appends each batch to its own file.
	printf '#!/bin/sh\nsleep 0.02\ncat >> "%s/r%s.out"\n' "$T_TMP" "$n" >"$T_TMP/r$n.sh"
	chmod +x "$T_TMP/r$n.sh"
	start_relay "$T_TMP/r$n.log" --queue ev --sink exec --exec "$T_TMP/r$n.sh" --batch 20
	relays+=("$RELAY_PID")
}
start_one; start_one; start_one
produce_for() {
	prods=()
	for _ in 1 2 3 4; do
		psql -XAtq -v ON_ERROR_STOP=1 "$DATABASE_URL" -c "CALL produce($1)" >/dev/null 2>>"$T_TMP/producer.log" &
		prods+=("$!"); PIDS+=("$!")
	done
}
# Waits until every committed event arrived, then checks what arrived.
check_all() {
	local p
	# Producers that lost their session at a restart end early: what
	# they committed is in sent.
	for p in "${prods[@]}"; do wait "$p" 2>/dev/null || true; done
	total=$(q "SELECT count(*) FROM sent")
	# comm needs text order on both sides (numeric order misreads 9, 10).
	q "SELECT id FROM sent" | LC_ALL=C sort >"$T_TMP/want"
	wait_until 60 '[ "$(ids_of "$T_TMP"/r*.out | LC_ALL=C sort -u | LC_ALL=C comm -13 - "$T_TMP/want" | wc -l)" = 0 ]'
	sleep 0.5
	got=$(ids_of "$T_TMP"/r*.out | sort -n | uniq | wc -l)
	extra=$(ids_of "$T_TMP"/r*.out | LC_ALL=C sort -u | LC_ALL=C comm -23 - "$T_TMP/want" | wc -l)
	[ "$extra" = 0 ] || fail "$1: $extra delivered events were never committed (rolled back?)"
	[ "$got" = "$total" ] || fail "$1: $got of $total committed events delivered"
	# Per key, each relay's output has strictly increasing versions
	# (after its first delivery of each event: a stream lost mid-batch
	# sends again what it had not confirmed).
	for f in "$T_TMP"/r*.out; do
		[ -s "$f" ] || continue
		grep -o '"key":"k[0-9]*".*"payload":{"v": [0-9]*}' "$f" |
			sed 's/"key":"\(k[0-9]*\)".*"v": \([0-9]*\)}/\1 \2/' | awk '!seen[$0]++' |
			awk -v f="$(basename "$f")" '{ if (($1 in last) && $2 <= last[$1]) { print f ": key " $1 " version " $2 " after " last[$1]; bad = 1 } last[$1] = $2 } END { exit bad }' ||
			fail "$1: per-key order broken"
	done
	dups=$(( $(ids_of "$T_TMP"/r*.out | wc -l) - got ))
}

# 1. kill -9 of a relay every second for 8 s while 4 producers write.
produce_for 8
kills=0
for _ in $(seq 1 8); do
	sleep 1
	# Kill the oldest live relay (the likeliest streamer), start another.
	victim=${relays[0]}
	kill -9 "$victim" 2>/dev/null && kills=$((kills + 1))
	wait "$victim" 2>/dev/null || true
	relays=("${relays[@]:1}")
	start_one
done
check_all "kill -9"
[ "$total" -gt 500 ] || fail "only $total events committed: nothing tested"
bound=$(( (kills + 1) * 20 * 4 ))
[ "$dups" -le "$bound" ] || fail "$dups duplicates, more than the unconfirmed batches of $kills kills ($bound)"
note "kill -9: $total committed, all delivered in per-key order; $kills relays killed, $dups duplicates (bound $bound)"
dups1=$dups

# 2. PostgreSQL restarted mid-stream.  Before PostgreSQL 17 a clean
# shutdown does not save a logical slot's confirmed position (only its
# periodic checkpoint of a slot whose restart point moved does), so the
# restart sends again what was confirmed since: duplicates, counted.
produce_for 5
sleep 2
pg_restart || fail "restart"
check_all "restart"
[ "$total" -gt 0 ]
note "PostgreSQL restart: $total committed in all, all delivered; $((dups - dups1)) more duplicates"
# Nothing waits: the slot is confirmed up to the end of the WAL (within
# the keepalives' round trip), so it pins nothing.
q "SELECT pg_current_wal_lsn() - '0/0'" >"$T_TMP/end"
wait_until 30 '[ "$(q "SELECT confirmed_flush_lsn - '"'0/0'"' >= $(cat "$T_TMP/end") FROM pg_replication_slots WHERE slot_name = '"'pgoutbox_ev'"'")" = t ]'
for p in "${relays[@]}"; do stop_relay "$p"; done
