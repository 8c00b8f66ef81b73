# A fleet streaming queues captured through the WAL (docs/fleet.md,
# docs/wal.md): three clusters with wal_level = logical, the WAL queue ev
# in a database of each (fw1, fw2, fw3) and a table queue ev in a fourth
# (fwt, on cluster 1), a producer on each (one transaction in ten rolls
# back).  Two relay processes serve all four databases into one exec sink
# each; one is killed -9 every 2 s and another started.  Cluster 3 is
# stopped for a while: fw1, fw2 and fwt keep delivering, and fw3 catches
# up after its restart (relays started while it was down read its capture
# once it answers).  Every committed event of every database arrives with
# its database's pgoutbox-source header, nothing of a rolled-back
# transaction does, and each relay's output keeps every key's order per
# database.  Then: `status` and /metrics per database, a slot dropped in
# fw2 is reported for fw2 only (the others deliver) and picked up once it
# is created again, SIGHUP removing fw1's section stops its stream (and
# adding it back streams it again), and
# SIGHUP with no [database NAME] section left is refused while the
# databases served keep flowing.
. "$(dirname "$0")/../lib.sh"
unset PG_PORT PG_DIR PG_URL PG_OPTS
DIRS=() PORTS=() OPTS=()
for i in 1 2 3; do
	PG_PORT= pg_start "$T_TMP/pg$i" wal_level=logical max_replication_slots=8 max_wal_senders=8 fsync=off ||
		fail "cannot start cluster $i with wal_level=logical"
	DIRS+=("$PG_DIR") PORTS+=("$PG_PORT") OPTS+=("$PG_OPTS")
done
trap 'cleanup_pids; for d in "${DIRS[@]}"; do pg_stop_dir "$d"; done' EXIT
# Database $1 (fw1 fw2 fw3 fwt): its cluster's index.
cl() { case $1 in fw2) echo 1 ;; fw3) echo 2 ;; *) echo 0 ;; esac; }
url() { local c; c=$(cl "$1"); echo "host=${DIRS[$c]} port=${PORTS[$c]} user=postgres dbname=$1"; }
DBS=(fw1 fw2 fw3 fwt)
for d in "${DBS[@]}"; do
	c=$(cl "$d")
	PG_DIR=${DIRS[$c]} PG_PORT=${PORTS[$c]} t_db "$d"
	if [ "$d" = fwt ]; then
		"$PGO_BIN" queue create ev --kind outbox >/dev/null || fail "queue create ev (table) in $d"
	else
		"$PGO_BIN" queue create ev --capture wal >/dev/null || fail "queue create ev --capture wal in $d"
	fi
	psql -XAtq -v ON_ERROR_STOP=1 "$DATABASE_URL" >/dev/null <<'SQL'
CREATE TABLE agg (key text PRIMARY KEY, version int NOT NULL DEFAULT 0);
INSERT INTO agg (key) SELECT 'k' || i FROM generate_series(1, 50) i;
CREATE TABLE sent (id bigint PRIMARY KEY, key text, v int);
-- Each event bumps its key's version in its transaction (versions
-- follow commit order) and records its id; one in ten rolls back.
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
        PERFORM pg_sleep(0.005);
    END LOOP;
END $$;
SQL
done
sql() { psql -XAtq -v ON_ERROR_STOP=1 "$(url "$1")" -c "$2"; }
FLEET=()
for d in "${DBS[@]}"; do FLEET+=(--db "$(url "$d")"); done
export PGOUTBOX_RELAY_RECONNECT_MAX=200ms PGOUTBOX_DATABASE_CONNECT_TIMEOUT=2s
relays=()
declare -A LOG_OF
n=0
start_one() {
	n=$((n + 1))
	# A sink slower than the producers, so that a relay killed holds
	# events it read and the sink has not acked.
	printf '#!/bin/sh\nsleep 0.02\ncat >> "%s/r%s.out"\n' "$T_TMP" "$n" >"$T_TMP/r$n.sh"
	chmod +x "$T_TMP/r$n.sh"
	start_relay "$T_TMP/r$n" --queue ev --sink exec --exec "$T_TMP/r$n.sh" --batch 20 "${FLEET[@]}" "$@"
	relays+=("$RELAY_PID")
	LOG_OF[$RELAY_PID]=$T_TMP/r$n.log
}
# Lines of database $1 in the outputs so far.
lines_of() { cat "$T_TMP"/r*.out 2>/dev/null | grep -F "\"pgoutbox-source\": \"$1\"}" || true; }
got() { lines_of "$1" | wc -l; }
produce() { # database, seconds
	psql -XAtq -v ON_ERROR_STOP=1 "$(url "$1")" -c "CALL produce($2)" >/dev/null 2>>"$T_TMP/producer.log" &
	PIDS+=("$!") PRODS+=("$!")
}
PRODS=()
start_one; start_one
wait_until 30 'grep -q "streaming slot" "$T_TMP/r1.log" || grep -q "streaming slot" "$T_TMP/r2.log"'
for d in "${DBS[@]}"; do produce "$d" 16; done
kills=0
kill_one() {
	local victim=${relays[0]}
	echo "$(date +%s.%N) ${LOG_OF[$victim]}" >>"$T_TMP/kills"
	kill -9 "$victim" 2>/dev/null && kills=$((kills + 1))
	wait "$victim" 2>/dev/null || true
	relays=("${relays[@]:1}")
	# A window where the standing-by process alone can take over (the
	# takeovers are measured below; they take about a second, and the
	# next kill, 2 s after this window, may be of that process).
	sleep 2.5
	start_one
}
for _ in 1 2; do sleep 2; kill_one; done
# Cluster 3 goes down; the killing goes on.
PG_DIR=${DIRS[2]} PG_PORT=${PORTS[2]} pg_stop
for d in fw1 fw2 fwt; do eval "n_$d=$(got $d)"; done
for _ in 1 2 3; do sleep 2; kill_one; done
[ "$(got fw1)" -gt "$n_fw1" ] && [ "$(got fw2)" -gt "$n_fw2" ] && [ "$(got fwt)" -gt "$n_fwt" ] ||
	fail "while cluster 3 was down: fw1 $n_fw1 -> $(got fw1), fw2 $n_fw2 -> $(got fw2), fwt $n_fwt -> $(got fwt)"
grep -q 'relay ev@fw3 -> exec: slot pgoutbox_ev: .*(retrying every second)' "$T_TMP"/r*.log ||
	grep -q 'relay ev@fw3 -> exec: cannot connect' "$T_TMP"/r*.log ||
	fail "no log line says fw3 is down: $(grep fw3 "$T_TMP"/r*.log | tail -3)"
for p in "${relays[@]}"; do kill -0 "$p" || fail "a relay died with cluster 3"; done
PG_DIR=${DIRS[2]} PG_PORT=${PORTS[2]} PG_OPTS=${OPTS[2]} pg_start_again || fail "cluster 3 did not start again"
produce fw3 4
for _ in 1 2; do sleep 2; kill_one; done

# Every committed event of each database, once at least, with its
# header; nothing rolled back; per relay and database, versions of a key
# strictly increase (after the first delivery of each event).
for p in "${PRODS[@]}"; do wait "$p" 2>/dev/null || true; done
check_db() {
	local d=$1 f
	sql "$d" "SELECT id FROM sent" | LC_ALL=C sort >"$T_TMP/want.$d"
	wait_until 60 '[ "$(lines_of '"$d"' | ids_of | LC_ALL=C sort -u | comm -13 - "$T_TMP/want.$d" | wc -l)" = 0 ]'
	total=$(wc -l <"$T_TMP/want.$d")
	[ "$total" -gt 100 ] || fail "$d: only $total events committed: nothing tested"
	extra=$(lines_of "$d" | ids_of | LC_ALL=C sort -u | comm -23 - "$T_TMP/want.$d" | wc -l)
	[ "$extra" = 0 ] || fail "$d: $extra delivered events were never committed (rolled back, or another database's)"
	for f in "$T_TMP"/r*.out; do
		[ -s "$f" ] || continue
		{ grep -F "\"pgoutbox-source\": \"$d\"}" "$f" || true; } |
			sed -n 's/.*"key":"\(k[0-9]*\)".*"payload":{"v": \([0-9]*\)}.*/\1 \2/p' | awk '!seen[$0]++' |
			awk -v f="$(basename "$f") $d" '{ if (($1 in last) && $2 <= last[$1]) { print f ": key " $1 " version " $2 " after " last[$1]; bad = 1 } last[$1] = $2 } END { exit bad }' ||
			fail "$d: per-key order broken"
	done
	dups=$(($(lines_of "$d" | wc -l) - total))
	# What a killed relay had not confirmed, at most (cluster 3's restart
	# before PostgreSQL 17 sends again what was confirmed since its
	# last checkpoint: not bounded here).
	[ "$d" = fw3 ] || [ "$dups" -le $(((kills + 1) * 20 * 4)) ] ||
		fail "$d: $dups duplicates, more than the unconfirmed batches of $kills kills"
	note "$d: $total committed, all delivered in per-key order, $dups duplicates"
}
for d in "${DBS[@]}"; do check_db "$d"; done
# No line without a database's header.
[ "$(cat "$T_TMP"/r*.out | grep -vc '"headers":{.*"pgoutbox-source": "fw[123t]"}')" = 0 ] || fail "lines without a source header"
# Takeovers: for each kill of the process streaming fw1's or fw2's slot,
# the time until a process standing by (started before the kill) streamed
# it.
python3 - "$T_TMP/kills" "$T_TMP"/r*.log >"$T_TMP/takeover" <<'PY' || fail "takeover: $(cat "$T_TMP/takeover")"
import datetime, re, sys
def ts(s):
    return datetime.datetime.strptime(s, '%Y-%m-%dT%H:%M:%S.%fZ').replace(tzinfo=datetime.timezone.utc).timestamp()
ev = {}  # log -> [(t, db, streaming)]
born = {}  # log -> its first line's time
for log in sys.argv[2:]:
    for line in open(log):
        if log not in born and re.match(r'\d{4}-\d\d-\d\dT', line):
            born[log] = ts(line.split()[0])
        m = re.match(r'(\S+) \w+ +relay ev@(fw[12]) -> exec: (.*)', line)
        if m and 'slot pgoutbox_ev' in m.group(3):
            ev.setdefault(log, []).append((ts(m.group(1)), m.group(2), m.group(3).startswith('streaming slot')))
took = []
for k in open(sys.argv[1]):
    t, victim = k.split()
    t = float(t)
    for db in ('fw1', 'fw2'):
        before = [s for (u, d, s) in ev.get(victim, []) if d == db and u < t]
        if not before or not before[-1]:
            continue  # it was not streaming db
        after = [u for log, es in ev.items() if log != victim and born.get(log, t) < t
                 for (u, d, s) in es if d == db and s and u > t]
        if not after:
            print(f'{db}: nobody took over after the kill at {t}')
            sys.exit(1)
        took.append(min(after) - t)
if not took:
    print('no kill of a streaming process: nothing measured')
    sys.exit(1)
print(f'{len(took)} takeovers, max {max(took):.2f} s, mean {sum(took) / len(took):.2f} s')
sys.exit(0 if max(took) < 15 else 1)
PY
note "$kills relays killed -9; cluster 3 stopped and started again; $(cat "$T_TMP/takeover")"

# The slots are confirmed past everything delivered (nothing waits).
for d in fw1 fw2 fw3; do
	end=$(sql "$d" "SELECT pg_current_wal_lsn() - '0/0'")
	wait_until 30 '[ "$(sql '"$d"' "SELECT confirmed_flush_lsn - '"'0/0'"' >= $end FROM pg_replication_slots WHERE slot_name = '"'pgoutbox_ev'"'")" = t ]'
done

# status: a row per database, the WAL ones with their slot.
"$PGO_BIN" status --queue ev "${FLEET[@]}" >"$T_TMP/status" || fail "status exited $?: $(cat "$T_TMP/status")"
for d in fw1 fw2 fw3; do
	grep -A4 -x "database $d, queue ev" "$T_TMP/status" | qgrep 'capture: wal, slot pgoutbox_ev streamed' ||
		fail "status of $d: $(cat "$T_TMP/status")"
done
grep -qx "database fwt, queue ev" "$T_TMP/status" || fail "no status of fwt"

# A relay with /metrics: the slot's lag per database.
for p in "${relays[@]}"; do stop_relay "$p"; done
relays=()
MPORT=$(pg_free_port)
start_one --metrics-listen "127.0.0.1:$MPORT"
wait_until 30 '[ "$(curl -sf "127.0.0.1:$MPORT/metrics" | grep -c "^pgoutbox_slot_lag_bytes{database=\"fw[123]\"")" = 3 ]'
curl -sf "127.0.0.1:$MPORT/metrics" | qgrep '^pgoutbox_slot_lag_seconds{database="fw2",queue="ev"' ||
	fail "no slot lag seconds of fw2: $(curl -sf "127.0.0.1:$MPORT/metrics" | grep slot_lag)"

# A slot dropped in fw2: reported for fw2, the others deliver; created
# again, fw2 streams from there without a restart.
stop_relay "${relays[0]}"
relays=()
# (Its WAL sender may outlive the relay a moment: the slot is active.)
wait_until 10 'sql fw2 "SELECT pg_drop_replication_slot('"'pgoutbox_ev'"')" >/dev/null 2>&1'
start_one
log=$T_TMP/r$n.log
wait_until 30 'grep -q "relay ev@fw2 -> exec: the replication slot pgoutbox_ev of queue ev is missing" "$log"'
for d in fw1 fw3 fwt; do
	id=$(sql "$d" "SELECT pgoutbox.send_to('ev', 'probe', 'p', 'x', '{\"v\": 0}')")
	wait_until 30 '[ "$(lines_of '"$d"' | ids_of | grep -cx "$id")" -ge 1 ]'
done
kill -0 "${relays[0]}" || fail "the relay stopped with fw2's slot missing"
sql fw2 "SELECT pg_create_logical_replication_slot('pgoutbox_ev', 'pgoutput')" >/dev/null
id=$(sql fw2 "SELECT pgoutbox.send_to('ev', 'probe', 'p', 'x', '{\"v\": 0}')")
wait_until 60 '[ "$(lines_of fw2 | ids_of | grep -cx "$id")" -ge 1 ]'
note "fw2's slot dropped: reported for fw2 alone, the others delivered; created again, fw2 delivered"
stop_relay "${relays[0]}"
relays=()

# SIGHUP: a WAL database's section removed stops its stream; then no
# [database NAME] section left: refused, every database still served.
CONF=$T_TMP/fleet.ini
for d in "${DBS[@]}"; do printf '[database %s]\nurl = %s\n\n' "$d" "$(url "$d")"; done >"$CONF"
FLEET=(--config "$CONF")
start_one
log=$T_TMP/r$n.log
wait_until 30 '[ "$(grep -c "streaming slot" "$log")" = 3 ]'
# fw1's section removed: its stream stops, the others go on.
for d in fw2 fw3 fwt; do printf '[database %s]\nurl = %s\n\n' "$d" "$(url "$d")"; done >"$CONF"
kill -HUP "${relays[0]}"
wait_until 10 'grep -q "database fw1 stopped" "$log"'
wait_until 10 '[ "$(sql fw1 "SELECT active FROM pg_replication_slots WHERE slot_name = '"'pgoutbox_ev'"'")" = f ]'
# Added back: it streams again.
for d in "${DBS[@]}"; do printf '[database %s]\nurl = %s\n\n' "$d" "$(url "$d")"; done >"$CONF"
kill -HUP "${relays[0]}"
wait_until 10 'grep -q "database fw1 added" "$log"'
wait_until 10 '[ "$(grep -c "relay ev@fw1 -> exec: streaming slot" "$log")" = 2 ]'
: >"$CONF"
kill -HUP "${relays[0]}"
wait_until 10 'grep -q "reload refused: the file has no \[database NAME\] section left" "$log"'
for d in "${DBS[@]}"; do
	id=$(sql "$d" "SELECT pgoutbox.send_to('ev', 'probe', 'p', 'x', '{\"v\": 0}')")
	wait_until 30 '[ "$(lines_of '"$d"' | ids_of | grep -cx "$id")" -ge 1 ]'
done
kill -0 "${relays[0]}" || fail "the fleet exited on a reload without sections"
stop_relay "${relays[0]}"
note "SIGHUP: fw1's section removed, its stream stopped, added back, streamed again; then without sections: refused, the 4 databases kept flowing"
