# Rolling upgrades (issue 38): a relay meeting a schema newer than its
# binary.  The newer versions are made here the way a later pgoutbox
# migrate records them (rows in pgoutbox.migrations with breaks_older):
# - a newer version that does not break older binaries: the running relay
#   keeps working across a reconnect, a new one starts, both say once at
#   INFO that the schema is newer and compatible;
# - one that breaks them: the running relay stops at its next connection
#   with "schema is version N and needs pgoutbox >= X" and exit 1 (a
#   supervisor restarts the new binary), a starting one is refused with
#   exit 2;
# - a version recorded without breaks_older counts as breaking.
# Under a producer throughout: every committed event arrives, per key in
# order (tests/order_check.py), nothing is left in the outbox.
. "$(dirname "$0")/../lib.sh"
t_db
make_aggregates
OUT=$T_TMP/all
: >"$OUT"
known=$("$PGO_BIN" --version | grep -o 'schema version [0-9]*' | grep -o '[0-9]*$')
[ -n "$known" ] || fail "no schema version in: $("$PGO_BIN" --version)"

launch() {
	PGOUTBOX_RELAY_STATS_INTERVAL=0 PGOUTBOX_RELAY_RECONNECT_MAX=200ms "$PGO_BIN" relay \
		--mode ordered --sink stdout --batch 50 >>"$OUT" 2>>"$T_TMP/relay$1.log" &
	RELAY=$!
	PIDS+=("$RELAY")
}
kick() {
	q "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
	   WHERE application_name LIKE 'pgoutbox %' AND pid <> pg_backend_pid()" >/dev/null
}
delivered() { grep -c '^{"id":' "$OUT" || true; }

PRODUCERS=()
start_producer 12 0.002
launch 1
wait_until 30 '[ "$(delivered)" -gt 50 ]'

# A compatible newer version: the relay keeps going after a reconnect.
q "INSERT INTO pgoutbox.migrations (version, name, breaks_older, release)
   VALUES ($((known + 1)), 'future_additive', false, '9.0.0')"
kick
wait_until 30 "grep -q 'schema $((known + 1)) is newer than this binary.s $known; compatible' '$T_TMP/relay1.log'"
n=$(delivered)
wait_until 30 "[ \"\$(delivered)\" -gt $((n + 50)) ]"
kill -0 "$RELAY" || fail "relay stopped on a compatible schema: $(tail -5 "$T_TMP/relay1.log")"
[ "$(grep -c 'compatible' "$T_TMP/relay1.log")" = 1 ] || fail "said more than once: $(grep compatible "$T_TMP/relay1.log")"
# A CLI command accepts it too.
"$PGO_BIN" status >/dev/null 2>"$T_TMP/status.log" || fail "status on a compatible schema: $(cat "$T_TMP/status.log")"

# A breaking newer version: the running relay exits 1 with the versions.
q "INSERT INTO pgoutbox.migrations (version, name, breaks_older, release)
   VALUES ($((known + 2)), 'future_breaking', true, '9.1.0')"
kick
rc=0
timeout 30 tail --pid="$RELAY" -f /dev/null || fail "relay still running on a breaking schema"
wait "$RELAY" || rc=$?
[ "$rc" = 1 ] || fail "relay exit $rc on a breaking schema, want 1: $(tail -5 "$T_TMP/relay1.log")"
grep -qF "schema is version $((known + 2)) and needs pgoutbox >= 9.1.0 (this is" "$T_TMP/relay1.log" ||
	fail "no clear message: $(tail -5 "$T_TMP/relay1.log")"

# At start: refused, exit 2, same message.
rc=0
timeout 30 "$PGO_BIN" relay --sink stdout >/dev/null 2>"$T_TMP/start.log" || rc=$?
[ "$rc" = 2 ] || fail "start on a breaking schema: exit $rc, want 2: $(cat "$T_TMP/start.log")"
grep -qF "schema is version $((known + 2)) and needs pgoutbox >= 9.1.0" "$T_TMP/start.log" || fail "start: $(cat "$T_TMP/start.log")"

# A version recorded without breaks_older (an unknown writer) breaks.
q "DELETE FROM pgoutbox.migrations WHERE version = $((known + 2))"
q "INSERT INTO pgoutbox.migrations (version, name) VALUES ($((known + 2)), 'future_unknown')"
rc=0
timeout 30 "$PGO_BIN" relay --sink stdout >/dev/null 2>"$T_TMP/start2.log" || rc=$?
[ "$rc" = 2 ] || fail "start on an unrecorded version: exit $rc, want 2: $(cat "$T_TMP/start2.log")"
grep -qF "knows up to version $known (version $((known + 2)) breaks it)" "$T_TMP/start2.log" || fail "start: $(cat "$T_TMP/start2.log")"

# The "new binary" (the same one, the breaking version gone) drains it.
q "DELETE FROM pgoutbox.migrations WHERE version = $((known + 2))"
launch 2
grep -q 'compatible' "$T_TMP/relay2.log" 2>/dev/null || wait_until 30 "grep -q compatible '$T_TMP/relay2.log'"
for p in "${PRODUCERS[@]}"; do wait "$p" || fail "the producer failed: $(cat "$T_TMP"/producer.*.log)"; done
wait_until 60 '[ "$(pending)" = 0 ]'
stop_relay "$RELAY"
note "events committed: $(q 'SELECT sum(version) FROM agg'), delivered: $(delivered)"
python3 "$(dirname "$0")/../order_check.py" "$OUT" "$DATABASE_URL" >"$T_TMP/check" || { cat "$T_TMP/check"; fail "order check"; }
note "$(head -1 "$T_TMP/check")"
