# The C API: pgo_send in the caller's transaction (with a rolled-back one),
# pgo_send_bulk through COPY (escaping tabs and newlines), a custom C sink
# driven by pgo_relay_run, SIGTERM; the example program is examples/c_api.c.
. "$(dirname "$0")/../lib.sh"
t_db
EX=$(dirname "$PGO_BIN")/c_api
[ -x "$EX" ] || fail "$EX not built"
"$EX" produce 1000 >"$T_TMP/produce" || fail "produce: $(cat "$T_TMP/produce")"
grep -q '^sent 1$' "$T_TMP/produce" || fail "pgo_send: $(cat "$T_TMP/produce")"
grep -q 'empty topic: event 0: topic is empty' "$T_TMP/produce" || fail "bad input: $(cat "$T_TMP/produce")"
[ "$(pending)" = 1001 ] || fail "pending $(pending), want 1001 (the rolled-back one must not count)"
[ "$(q "SELECT payload->>'tab' FROM pgoutbox.outbox WHERE key = 'bulk-7'")" = "$(printf 'a\tb')" ] || fail "COPY escaping"
"$EX" relay >"$T_TMP/relayed" 2>"$T_TMP/relay.log" &
R=$!; PIDS+=("$R")
wait_until 20 '[ "$(pending)" = 0 ]'
stop_relay "$R"
[ "$(wc -l <"$T_TMP/relayed")" = 1001 ] || fail "relayed $(wc -l <"$T_TMP/relayed") lines"
grep -q '^1 order-1 {"id": 1}$' "$T_TMP/relayed" || fail "event 1: $(head -2 "$T_TMP/relayed")"
grep -q ghost "$T_TMP/relayed" && fail "the rolled-back event was relayed"
true
