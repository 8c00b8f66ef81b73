# Rolling upgrade from the previous release (issue 38): 0.1.0 (git
# eda525e, schema 18) is built from git, migrates a database and runs two
# ordered relays under a producer; the new binary migrates the database
# while they run.  The old relays keep working on their sessions; at
# their next connection (forced here) they stop with their own message
# naming the versions, non-zero.  Then new relays take over.  Every
# committed event delivered at least once, per key in order
# (tests/order_check.py), nothing left in the outbox.
. "$(dirname "$0")/../lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
REL=eda525e
git -C "$ROOT" cat-file -e "$REL^{commit}" 2>/dev/null ||
	fail "release 0.1.0 ($REL) is not in $ROOT's git history (a shallow clone? git fetch --unshallow)"

# The previous release, without its tests and optional sinks.
mkdir -p "$T_TMP/old/src"
git -C "$ROOT" archive "$REL" | tar -x -C "$T_TMP/old/src"
(cd "$T_TMP/old/src" && meson setup "$T_TMP/old/build" -Dtests=false -Dredis=disabled \
	-Dnats=disabled -Drabbitmq=disabled -Dkafka=disabled -Dcurl=disabled \
	-Dmicrohttpd=disabled -Dsystemd=disabled && ninja -C "$T_TMP/old/build") \
	>"$T_TMP/old/build.log" 2>&1 || fail "building $REL: $(tail -20 "$T_TMP/old/build.log")"
OLD=$T_TMP/old/build/pgoutbox
"$OLD" --version | qgrep 'schema version 18' || fail "old binary: $("$OLD" --version)"

name=$(basename "$0" .sh)
PGOPTIONS='-c client_min_messages=warning' psql -XAtq "$(pg_url postgres)" \
	-c "DROP DATABASE IF EXISTS $name" -c "CREATE DATABASE $name" >/dev/null
export DATABASE_URL
DATABASE_URL=$(pg_url "$name")
"$OLD" migrate >/dev/null 2>"$T_TMP/old-migrate.log" || fail "old migrate: $(cat "$T_TMP/old-migrate.log")"
make_aggregates

OUT=$T_TMP/all
: >"$OUT"
cat >"$T_TMP/sink.sh" <<SH
#!/bin/sh
cat >> $OUT
SH
chmod +x "$T_TMP/sink.sh"
relay=()
nrelay=0
launch() { # BINARY NAME
	PGOUTBOX_RELAY_STATS_INTERVAL=0 "$1" relay --mode ordered --sink exec --exec "$T_TMP/sink.sh" \
		--batch 50 --heartbeat 200ms --name "$2" 2>>"$T_TMP/$2.log" &
	relay[nrelay]=$!
	nrelay=$((nrelay + 1))
	PIDS+=("$!")
}
delivered() { grep -c '^{"id":' "$OUT" || true; }

PRODUCERS=()
start_producer 12 0.002
launch "$OLD" old0
launch "$OLD" old1
wait_until 30 '[ "$(delivered)" -gt 100 ]'

# The new binary migrates under them.
"$PGO_BIN" migrate >"$T_TMP/migrate.out" 2>"$T_TMP/migrate.log" || fail "new migrate: $(cat "$T_TMP/migrate.log")"
grep -q 'from version 18 to' "$T_TMP/migrate.out" || fail "new migrate: $(cat "$T_TMP/migrate.out")"
n=$(delivered)
sleep 1
for i in 0 1; do
	if ! kill -0 "${relay[$i]}" 2>/dev/null; then
		grep -q 'upgrade pgoutbox' "$T_TMP/old$i.log" || fail "old relay $i stopped without saying why: $(tail -5 "$T_TMP/old$i.log")"
	fi
done
note "old relays after the migration: $(($(delivered) - n)) deliveries in 1 s"

# Their next connection: they stop, naming the versions, non-zero.
q "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
   WHERE application_name LIKE 'pgoutbox %' AND pid <> pg_backend_pid()" >/dev/null
for i in 0 1; do
	rc=0
	timeout 30 tail --pid="${relay[$i]}" -f /dev/null || fail "old relay $i still runs on schema 20"
	wait "${relay[$i]}" || rc=$?
	[ "$rc" != 0 ] || fail "old relay $i exited 0 on a newer schema"
	grep -q 'schema is version [0-9]* but this pgoutbox (0.1.0) knows up to version 18: upgrade pgoutbox' \
		"$T_TMP/old$i.log" || fail "old relay $i: no clear message: $(tail -5 "$T_TMP/old$i.log")"
	note "old relay $i: exit $rc"
done

# The new relays take over and drain.
launch "$PGO_BIN" new0
launch "$PGO_BIN" new1
for p in "${PRODUCERS[@]}"; do wait "$p" || fail "the producer failed: $(cat "$T_TMP"/producer.*.log)"; done
wait_until 60 '[ "$(pending)" = 0 ]'
stop_relay "${relay[2]}"
stop_relay "${relay[3]}"
note "events committed: $(q 'SELECT sum(version) FROM agg'), delivered: $(delivered)"
python3 "$ROOT/tests/order_check.py" "$OUT" "$DATABASE_URL" >"$T_TMP/check" || { cat "$T_TMP/check"; fail "order check"; }
note "$(head -1 "$T_TMP/check")"
