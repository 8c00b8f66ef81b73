# A sink that cannot take anything is an outage, not the events' failure
# (issue 19, item 3): no attempt is spent and nothing is dead-lettered.
#  1. stdout whose reader left (`relay --sink stdout | head -0`: EPIPE);
#  2. an exec sink whose command is missing (exit 127), then present but
#     not executable (126), then fixed: everything is delivered.
. "$(dirname "$0")/../lib.sh"
t_db
# Without the fix these would dead-letter every event within seconds.
export PGOUTBOX_RELAY_RETRY_BASE=10ms PGOUTBOX_RELAY_RETRY_MAX=20ms PGOUTBOX_RELAY_MAX_ATTEMPTS=2
export PGOUTBOX_RELAY_RECONNECT_MAX=200ms PGOUTBOX_RELAY_STATS_INTERVAL=0
send_n() { q "INSERT INTO pgoutbox.outbox (topic, type, payload) SELECT 't', 'x', jsonb_build_object('i', i) FROM generate_series(1, $1) i"; }
unavailable_lines() { grep -c 'sink unavailable' "$1" || true; }
untouched() {
	[ "$(q 'SELECT count(*) FROM pgoutbox.dead_letters')" = 0 ] || fail "$1: dead letters: $(q 'SELECT id, attempts, last_error FROM pgoutbox.dead_letters LIMIT 3')"
	[ "$(q 'SELECT coalesce(max(attempts), 0) FROM pgoutbox.outbox')" = 0 ] || fail "$1: attempts spent: $(q 'SELECT max(attempts) FROM pgoutbox.outbox')"
}

# 1. stdout with no reader.
send_n 50
# (The relay is this shell's child, its stdout a pipe to head.)
"$PGO_BIN" relay --sink stdout --log-level debug 2>"$T_TMP/pipe.log" > >(head -c 0) &
relay=$!
PIDS+=("$relay")
wait_until 20 '[ "$(unavailable_lines "$T_TMP/pipe.log")" -ge 5 ]'
grep -q 'stdout: write: Broken pipe' "$T_TMP/pipe.log" || fail "no EPIPE in the log: $(tail -3 "$T_TMP/pipe.log")"
untouched "stdout without a reader"
[ "$(pending)" = 50 ] || fail "stdout without a reader: $(pending) of 50 left"
stop_relay "$relay"
start_relay "$T_TMP/out1" --sink stdout
wait_until 20 '[ "$(pending)" = 0 ]'
stop_relay "$RELAY_PID"
[ "$(ids_of "$T_TMP/out1" | sort -u | wc -l)" = 50 ] || fail "stdout after the outage: $(ids_of "$T_TMP/out1" | sort -u | wc -l) of 50"

# 2. exec: missing, then not executable, then fixed, in one running relay.
send_n 30
start_relay "$T_TMP/out2" --sink exec --exec "$T_TMP/sink.sh" --log-level debug
wait_until 20 '[ "$(unavailable_lines "$T_TMP/out2.log")" -ge 5 ]'
grep -q 'exit status 127 (command not found)' "$T_TMP/out2.log" || fail "no 127 in the log: $(tail -3 "$T_TMP/out2.log")"
untouched "exec command missing"
printf '#!/bin/sh\ncat >>%s\n' "$T_TMP/delivered" >"$T_TMP/sink.sh"
n=$(unavailable_lines "$T_TMP/out2.log")
wait_until 20 '[ "$(unavailable_lines "$T_TMP/out2.log")" -ge $((n + 5)) ]'
grep -q 'exit status 126 (command not executable)' "$T_TMP/out2.log" || fail "no 126 in the log: $(tail -3 "$T_TMP/out2.log")"
untouched "exec command not executable"
[ "$(pending)" = 30 ] || fail "exec outage: $(pending) of 30 left"
chmod +x "$T_TMP/sink.sh"
wait_until 20 '[ "$(pending)" = 0 ]'
[ "$(ids_of "$T_TMP/delivered" | sort -u | wc -l)" = 30 ] || fail "exec after the fix: $(ids_of "$T_TMP/delivered" | sort -u | wc -l) of 30"
[ "$(q 'SELECT count(*) FROM pgoutbox.dead_letters')" = 0 ] || fail "dead letters after the exec outage"
stop_relay "$RELAY_PID"
note "stdout EPIPE and exec 127/126: no attempt spent, 80 of 80 delivered after the fix"
