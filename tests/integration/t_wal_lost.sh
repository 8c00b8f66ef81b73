# A WAL queue's slot invalidated by max_slot_wal_keep_size (docs/wal.md):
# the relay refuses to start with a clear error, status shows the slot
# lost; nothing is silent.
. "$(dirname "$0")/../lib.sh"
unset PG_PORT PG_DIR PG_URL PG_OPTS
pg_start "$T_TMP/pgwal" wal_level=logical max_replication_slots=4 max_wal_senders=4 \
	max_slot_wal_keep_size=1MB fsync=off ||
	fail "cannot start a cluster with wal_level=logical"
trap 'cleanup_pids; pg_stop' EXIT
t_db
"$PGO_BIN" queue create ev --capture wal >/dev/null || fail "queue create --capture wal"
q "SELECT pgoutbox.send_to('ev', 't', 'a', 'x', '{}')" >/dev/null
# No relay: the slot keeps its WAL until the cap, then loses it.
for _ in 1 2 3 4; do
	q "CREATE TABLE IF NOT EXISTS filler (x text); INSERT INTO filler SELECT repeat('x', 100) FROM generate_series(1, 2000); SELECT pg_switch_wal()" >/dev/null
done
q "CHECKPOINT"
wait_until 20 '[ "$(q "SELECT wal_status FROM pg_replication_slots WHERE slot_name = '"'pgoutbox_ev'"'")" = lost ]'
rc=0
timeout 20 "$PGO_BIN" relay --queue ev --sink stdout >"$T_TMP/out" 2>"$T_TMP/relay.log" || rc=$?
[ "$rc" != 0 ] && [ "$rc" != 124 ] || fail "a relay of a lost slot did not stop with an error (exit $rc)"
grep -q 'replication slot pgoutbox_ev of queue ev is lost' "$T_TMP/relay.log" || fail "no clear error: $(tail -2 "$T_TMP/relay.log")"
[ ! -s "$T_TMP/out" ] || fail "a relay of a lost slot delivered"
"$PGO_BIN" status --queue ev | qgrep 'wal_status lost' || fail "status does not show the slot lost: $("$PGO_BIN" status --queue ev)"
note "slot lost past max_slot_wal_keep_size: $(grep -o 'is lost.*' "$T_TMP/relay.log" | head -c 100)"
