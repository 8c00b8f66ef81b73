# The C API: pgo_send in the caller's transaction (with a rolled-back one),
# pgo_send_bulk through COPY (escaping tabs and newlines), a custom C sink
# driven by pgo_relay_run, SIGTERM; then both again as docs/security.md's
# producer role (send() and send_batch()); the example program is
# examples/c_api.c.
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

# docs/security.md's producer role, no rights on the outbox table: pgo_send
# calls pgoutbox.send() and pgo_send_bulk pgoutbox.send_batch() (a COPY
# would be refused), with the same escaping.
psql -XAtq -v ON_ERROR_STOP=1 "$DATABASE_URL" >/dev/null <<'SQL' || fail "the producer role"
DO $$ BEGIN CREATE ROLE c_api_producer LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
GRANT USAGE ON SCHEMA pgoutbox TO c_api_producer;
GRANT EXECUTE ON FUNCTION pgoutbox.send(text, text, text, jsonb, jsonb) TO c_api_producer;
GRANT EXECUTE ON FUNCTION pgoutbox.send_batch(text, text[], text[], jsonb[], jsonb[]),
                          pgoutbox.send_batch(text[], text[], text[], jsonb[], jsonb[]) TO c_api_producer;
-- the example's own business table
GRANT CREATE ON SCHEMA public TO c_api_producer;
GRANT INSERT ON c_orders TO c_api_producer;
SQL
[ "$(q "SELECT has_table_privilege('c_api_producer', 'pgoutbox.outbox', 'INSERT')")" = f ] || fail "the role may insert into the outbox"
DATABASE_URL="$DATABASE_URL user=c_api_producer" "$EX" produce 300 >"$T_TMP/produce2" 2>&1 || fail "produce as the producer role: $(cat "$T_TMP/produce2")"
grep -q '^bulk 300$' "$T_TMP/produce2" || fail "pgo_send_bulk as the producer role: $(cat "$T_TMP/produce2")"
[ "$(pending)" = 301 ] || fail "pending $(pending) after the producer role's run, want 301"
[ "$(q "SELECT count(*) FROM pgoutbox.outbox WHERE key = 'bulk-7' AND payload->>'tab' = E'a\\tb'")" = 1 ] || fail "send_batch escaping: $(q "SELECT payload FROM pgoutbox.outbox WHERE key = 'bulk-7'")"
[ "$(q "SELECT count(DISTINCT key) FROM pgoutbox.outbox WHERE topic = 'bulk'")" = 300 ] || fail "bulk keys"
# And into an outbox queue of its own: send_to() and send_batch_to().
"$PGO_BIN" queue create --kind outbox c_billing >/dev/null || fail "queue create"
q "GRANT EXECUTE ON FUNCTION pgoutbox.send_to(text, text, text, text, jsonb, jsonb), pgoutbox.send_batch_to(text, text[], text[], text[], jsonb[], jsonb[]), pgoutbox.send_batch_to(text, text, text[], text[], jsonb[], jsonb[]) TO c_api_producer"
DATABASE_URL="$DATABASE_URL user=c_api_producer" "$EX" produce 50 c_billing >"$T_TMP/produce3" 2>&1 || fail "produce into c_billing as the producer role: $(cat "$T_TMP/produce3")"
[ "$(q "SELECT count(*) FROM pgoutbox.c_billing")" = 51 ] || fail "c_billing holds $(q "SELECT count(*) FROM pgoutbox.c_billing"), want 51"
[ "$(pending)" = 301 ] || fail "the outbox got events meant for c_billing"
true
