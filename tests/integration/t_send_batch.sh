# pgoutbox.send_batch(): many events in one call, under the least-privilege
# producer role (EXECUTE only, as documented in docs/security.md); one topic or
# one per event; ids in input order; bad input (arrays of different
# lengths, NULLs where none may be, a payload over 1 MiB, headers not an
# object) is an error naming the element, and nothing of the call is
# written, not even the good elements before the bad one.
. "$(dirname "$0")/../lib.sh"
t_db
P=t_send_batch_producer
psql -XAtq -v ON_ERROR_STOP=1 "$DATABASE_URL" >/dev/null <<SQL
CREATE ROLE $P LOGIN;
GRANT USAGE ON SCHEMA pgoutbox TO $P;
GRANT EXECUTE ON FUNCTION pgoutbox.send_batch(text, text[], text[], jsonb[], jsonb[]),
                          pgoutbox.send_batch(text[], text[], text[], jsonb[], jsonb[]) TO $P;
SQL
base=$DATABASE_URL
as_p() { psql -XAtq -v ON_ERROR_STOP=1 "${base/user=postgres/user=$P}" -c "$1"; }

# One topic, 3 events; then one topic per event with headers.
ids=$(as_p "SELECT pgoutbox.send_batch('orders', ARRAY['k1', NULL, 'k3'], ARRAY['created', 'paid', NULL],
                                        ARRAY['{\"n\": 1}', '{\"n\": 2}', '3']::jsonb[])") ||
	fail "the producer role cannot call send_batch"
[ "$(q "SELECT array_agg(id ORDER BY id)::text FROM pgoutbox.outbox")" = "$ids" ] ||
	fail "send_batch returned $ids, the outbox holds $(q 'SELECT array_agg(id) FROM pgoutbox.outbox')"
[ "$(q "SELECT string_agg(concat_ws('|', topic, coalesce(key, '-'), type, payload::text, headers::text), ' ' ORDER BY id)
        FROM pgoutbox.outbox")" = 'orders|k1|created|{"n": 1}|{} orders|-|paid|{"n": 2}|{} orders|k3||3|{}' ] ||
	fail "rows: $(q 'SELECT topic, key, type, payload, headers FROM pgoutbox.outbox ORDER BY id')"
as_p "SELECT pgoutbox.send_batch(ARRAY['a', 'b'], NULL, NULL, ARRAY['1', '2']::jsonb[],
                                 ARRAY['{\"traceparent\": \"00-x\"}', NULL]::jsonb[])" >/dev/null
[ "$(q "SELECT string_agg(topic || headers::text, ' ' ORDER BY id) FROM pgoutbox.outbox WHERE topic IN ('a', 'b')")" = \
	'a{"traceparent": "00-x"} b{}' ] || fail "per-event topics and headers: $(q 'SELECT topic, headers FROM pgoutbox.outbox')"
# Empty batch: nothing, no error.
[ "$(as_p "SELECT pgoutbox.send_batch('t', NULL, NULL, '{}'::jsonb[])")" = "{}" ] || fail "empty batch"
# 1000 events in one call, ids in input order (the payload says which).
as_p "SELECT pgoutbox.send_batch('bulk', NULL, NULL, (SELECT array_agg(to_jsonb(i) ORDER BY i) FROM generate_series(1, 1000) i))" >/dev/null
[ "$(q "SELECT bool_and(payload::text::int = rn) FROM (SELECT payload, row_number() OVER (ORDER BY id) rn FROM pgoutbox.outbox WHERE topic = 'bulk') x")" = t ] ||
	fail "1000 events: ids do not follow the input order"
before=$(pending)
[ "$before" = 1005 ] || fail "expected 1005 events, got $before"

# Bad input: the error names the element, and nothing is written.  The
# good first element of each call must not stay behind.
expect_batch_err() {
	local msg=$1 sql=$2 err
	if err=$(as_p "$sql" 2>&1); then fail "accepted: $sql"; fi
	grep -qF -- "$msg" <<<"$err" || fail "error lacks '$msg': $err"
	[ "$(pending)" = "$before" ] || fail "a refused batch wrote events: $sql"
}
expect_batch_err '3 payloads but 2 keys' \
	"SELECT pgoutbox.send_batch('t', ARRAY['a', 'b'], NULL, ARRAY['1', '2', '3']::jsonb[])"
expect_batch_err '2 payloads but NULL keys, 3 types' \
	"SELECT pgoutbox.send_batch('t', NULL, ARRAY['x', 'y', 'z'], ARRAY['1', '2']::jsonb[])"
expect_batch_err '1 headers' \
	"SELECT pgoutbox.send_batch('t', NULL, NULL, ARRAY['1', '2']::jsonb[], ARRAY['{}']::jsonb[])"
expect_batch_err '2 topics for 3 payloads' \
	"SELECT pgoutbox.send_batch(ARRAY['a', 'b'], NULL, NULL, ARRAY['1', '2', '3']::jsonb[])"
expect_batch_err 'payloads[2] is NULL' \
	"SELECT pgoutbox.send_batch('t', NULL, NULL, ARRAY['1', NULL]::jsonb[])"
expect_batch_err 'payloads must not be NULL' \
	"SELECT pgoutbox.send_batch('t', NULL, NULL, NULL)"
expect_batch_err 'topics[2] is empty or NULL' \
	"SELECT pgoutbox.send_batch(ARRAY['a', NULL], NULL, NULL, ARRAY['1', '2']::jsonb[])"
expect_batch_err 'topics[3] is empty or NULL' \
	"SELECT pgoutbox.send_batch(ARRAY['a', 'b', ''], NULL, NULL, ARRAY['1', '2', '3']::jsonb[])"
expect_batch_err 'topics[1] is empty or NULL' \
	"SELECT pgoutbox.send_batch(NULL::text, NULL, NULL, ARRAY['1']::jsonb[])"
expect_batch_err 'headers[2] must be a JSON object, not array' \
	"SELECT pgoutbox.send_batch('t', NULL, NULL, ARRAY['1', '2']::jsonb[], ARRAY['{}', '[1]']::jsonb[])"
expect_batch_err 'one dimension' \
	"SELECT pgoutbox.send_batch('t', NULL, NULL, ARRAY[['1', '2'], ['3', '4']]::jsonb[])"
expect_batch_err 'payloads[2] is 1100' \
	"SELECT pgoutbox.send_batch('t', NULL, NULL, ARRAY['1'::jsonb, to_jsonb(repeat('x', 1100000))])"
# Inside the caller's transaction: a rollback takes the batch with it.
as_p "BEGIN; SELECT pgoutbox.send_batch('t', NULL, NULL, ARRAY['1', '2']::jsonb[]); ROLLBACK" >/dev/null
[ "$(pending)" = "$before" ] || fail "a rolled-back batch stayed"
# The producer role still cannot read or change the outbox.
as_p "SELECT count(*) FROM pgoutbox.outbox" 2>/dev/null && fail "producer can read the outbox"
as_p "SELECT pgoutbox.send_batch_error('x', 1, 'y')" 2>/dev/null && fail "producer can call the internal error helper"
true
