# Configuration: file < environment < flags; `config show` masks secrets;
# SIGHUP reloads reloadable keys (relay.batch) and keeps the others.
. "$(dirname "$0")/../lib.sh"
t_db
printf '[relay]\nbatch = 7\nin_flight = 1\npoll_interval = 200ms\n[log]\nlevel = info\n' >"$T_TMP/relay.ini"
out=$("$PGO_BIN" config show --config "$T_TMP/relay.ini" --db 'postgres://app:s3cret@db.example:5432/app')
grep -q 'batch = 7' <<<"$out" || fail "file value not shown: $out"
grep -q 's3cret' <<<"$out" && fail "config show printed the password"
grep -q 'app:\*\*\*@db.example' <<<"$out" || fail "masked URL missing: $out"
out=$(PGOUTBOX_RELAY_BATCH=9 "$PGO_BIN" config show --config "$T_TMP/relay.ini")
grep -q 'batch = 9' <<<"$out" || fail "env did not override the file"
out=$(PGOUTBOX_RELAY_BATCH=9 "$PGO_BIN" config show --config "$T_TMP/relay.ini" --batch 11)
grep -q 'batch = 11' <<<"$out" || fail "flag did not override env"

q "INSERT INTO pgoutbox.outbox (topic, type, payload) SELECT 't', 'x', '{}' FROM generate_series(1, 70)"
start_relay "$T_TMP/out" --config "$T_TMP/relay.ini" --sink exec \
	--exec "cat >/dev/null; echo \$PGOUTBOX_BATCH_SIZE >> $T_TMP/sizes"
wait_until 10 '[ "$(pending)" = 0 ]'
[ "$(sort -u "$T_TMP/sizes")" = 7 ] || fail "batch sizes before reload: $(sort -u "$T_TMP/sizes" | tr '\n' ' ')"
printf '[relay]\nbatch = 35\nin_flight = 4\npoll_interval = 200ms\n[log]\nlevel = info\n' >"$T_TMP/relay.ini"
kill -HUP "$RELAY_PID"
wait_until 5 "grep -q 'configuration reloaded' '$T_TMP/out.log'"
grep -q 'in_flight' "$T_TMP/out.log" || fail "no warning that relay.in_flight needs a restart"
: >"$T_TMP/sizes"
q "INSERT INTO pgoutbox.outbox (topic, type, payload) SELECT 't', 'x', '{}' FROM generate_series(1, 70)"
wait_until 10 '[ "$(pending)" = 0 ]'
[ "$(sort -u "$T_TMP/sizes")" = 35 ] || fail "batch sizes after reload: $(sort -u "$T_TMP/sizes" | tr '\n' ' ')"
# A broken file on reload keeps the running configuration.
printf '[relay]\nbatch = -3\n' >"$T_TMP/relay.ini"
kill -HUP "$RELAY_PID"
wait_until 5 "grep -q 'reload failed' '$T_TMP/out.log'"
kill -0 "$RELAY_PID" || fail "a bad reload killed the relay"
# A CR followed by 300 characters (issue 19, item 12) crashed the INI
# reader: `config check` refuses it, and a reload keeps the old config.
printf '[relay]\nname = x\r%0300d\n' 0 | tr 0 A >"$T_TMP/cr.ini"
[ "$(wc -c <"$T_TMP/cr.ini")" = 318 ] || fail "cr.ini is not the issue's input"
set +e
out=$("$PGO_BIN" config check --config "$T_TMP/cr.ini" 2>&1)
rc=$?
set -e
[ "$rc" = 2 ] || fail "config check of a CR line: exit $rc: $out"
grep -q 'cr.ini:2: carriage return inside the line' <<<"$out" || fail "config check of a CR line: $out"
cp "$T_TMP/cr.ini" "$T_TMP/relay.ini"
kill -HUP "$RELAY_PID"
wait_until 5 "[ \$(grep -c 'reload failed' '$T_TMP/out.log') = 2 ]"
grep -q 'relay.ini:2: carriage return inside the line' "$T_TMP/out.log" || fail "the reload did not say why it failed"
kill -0 "$RELAY_PID" || fail "a reload with a CR line killed the relay"
: >"$T_TMP/sizes"
q "INSERT INTO pgoutbox.outbox (topic, type, payload) SELECT 't', 'x', '{}' FROM generate_series(1, 70)"
wait_until 10 '[ "$(pending)" = 0 ]'
[ "$(sort -u "$T_TMP/sizes")" = 35 ] || fail "batch sizes after the CR reload: $(sort -u "$T_TMP/sizes" | tr '\n' ' ')"
stop_relay "$RELAY_PID"
