# An event sent in a rolled-back transaction is never relayed; one sent in
# a committed transaction is, with the business row, exactly as written.
. "$(dirname "$0")/../lib.sh"
t_db
q "CREATE TABLE orders (id int PRIMARY KEY, total numeric)"
psql -XAtq -v ON_ERROR_STOP=1 "$DATABASE_URL" >/dev/null <<'SQL'
BEGIN;
INSERT INTO orders VALUES (1, 10);
SELECT pgoutbox.send('orders', '1', 'order.created', '{"id": 1, "total": 10}');
ROLLBACK;
BEGIN;
INSERT INTO orders VALUES (2, 20);
SELECT pgoutbox.send('orders', '2', 'order.created', '{"id": 2, "total": 20}', '{"traceparent": "00-abc-01"}');
COMMIT;
BEGIN;
SELECT pgoutbox.send('orders', '3', 'order.created', '{"id": 3}');
SAVEPOINT s; SELECT pgoutbox.send('orders', '4', 'order.created', '{"id": 4}'); ROLLBACK TO SAVEPOINT s;
COMMIT;
SQL
start_relay "$T_TMP/out" --sink stdout
wait_until 10 '[ "$(pending)" = 0 ]'
sleep 0.3
stop_relay "$RELAY_PID"
[ "$(ids_of "$T_TMP/out" | wc -l)" = 2 ] || fail "expected 2 events, got: $(cat "$T_TMP/out")"
grep -q '"key":"1"' "$T_TMP/out" && fail "rolled-back event 1 was relayed"
grep -q '"key":"4"' "$T_TMP/out" && fail "event 4 rolled back to a savepoint was relayed"
line=$(grep '"key":"2"' "$T_TMP/out") || fail "committed event 2 missing"
case "$line" in
*'"topic":"orders","key":"2","type":"order.created","payload":{"id": 2, "total": 20},"headers":{"traceparent": "00-abc-01"},"created_at":"'*Z'","attempts":0}') ;;
*) fail "unexpected line: $line" ;;
esac
grep -q '"key":"3"' "$T_TMP/out" || fail "committed event 3 missing"
