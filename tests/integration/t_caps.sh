# Every field of an event is capped, not only the payload (issue 19, item
# 11): topic and type 256 bytes, key 1024, headers 64 KiB, refused at
# INSERT in the outbox and in work queues; relay.batch_bytes stops a claim
# once its events reach that many bytes, so large headers make smaller
# batches, in every mode, and everything is still delivered.
. "$(dirname "$0")/../lib.sh"
t_db
"$PGO_BIN" queue create jobs >/dev/null
# refused QUERY CONSTRAINT: the statement fails naming the constraint (a
# domain's since 017_lighter_rows, shared by every queue table).
refused() {
	local err
	err=$(psql -XAtq -v ON_ERROR_STOP=1 "$DATABASE_URL" -c "$1" 2>&1 >/dev/null) && fail "accepted: $1"
	grep -q "violates check constraint \"$2\"" <<<"$err" || fail "$1: $err"
}
for t in outbox jobs; do
	refused "INSERT INTO pgoutbox.$t (topic, type, payload) VALUES (repeat('t', 257), 'x', '{}')" event_topic_max_256
	refused "INSERT INTO pgoutbox.$t (topic, type, payload) VALUES ('t', repeat('y', 257), '{}')" event_type_max_256
	refused "INSERT INTO pgoutbox.$t (topic, key, type, payload) VALUES ('t', repeat('k', 1025), 'x', '{}')" event_key_max_1024
	refused "INSERT INTO pgoutbox.$t (topic, type, payload, headers) VALUES ('t', 'x', '{}', jsonb_build_object('h', repeat('h', 65536)))" event_headers_max_64k
	refused "INSERT INTO pgoutbox.$t (topic, type, payload) VALUES ('', 'x', '{}')" event_topic_not_empty
	refused "INSERT INTO pgoutbox.$t (topic, type, payload, headers) VALUES ('t', 'x', '{}', '[]')" event_headers_object
	refused "INSERT INTO pgoutbox.$t (topic, type, payload) VALUES ('t', 'x', jsonb_build_object('p', repeat('p', 1048576)))" event_payload_max_1mib
	# At the caps: accepted.
	q "INSERT INTO pgoutbox.$t (topic, key, type, payload, headers) VALUES (repeat('t', 256), repeat('k', 1024), repeat('y', 256), '{}', jsonb_build_object('h', repeat('h', 65000)))"
done
refused "SELECT pgoutbox.send('t', 'k', 'x', '{}', jsonb_build_object('a', repeat('h', 40000), 'b', repeat('h', 40000)))" event_headers_max_64k
refused "SELECT pgoutbox.enqueue('jobs', '{}', topic => repeat('t', 300))" event_topic_max_256
q "DELETE FROM pgoutbox.outbox"

# relay.batch_bytes: 40 events with 60 KB headers, 200 KB a claim at most
# (an event is 60 KB and change: 4 a batch), in each mode.
for mode in ordered concurrent strict; do
	q "INSERT INTO pgoutbox.outbox (topic, key, type, payload, headers) SELECT 't', 'k' || (i % 3), 'x', jsonb_build_object('i', i), jsonb_build_object('h', repeat('h', 60000)) FROM generate_series(1, 40) i"
	: >"$T_TMP/sizes.$mode"
	start_relay "$T_TMP/out.$mode" --mode "$mode" --batch 500 --batch-bytes 200000 --sink exec \
		--exec "cat >/dev/null; echo \$PGOUTBOX_BATCH_SIZE >> $T_TMP/sizes.$mode"
	wait_until 30 '[ "$(pending)" = 0 ]'
	stop_relay "$RELAY_PID"
	max=$(sort -n "$T_TMP/sizes.$mode" | tail -1)
	sum=$(paste -sd+ "$T_TMP/sizes.$mode" | bc)
	[ "$max" -le 4 ] || fail "$mode: a batch of $max events of 60 KB under --batch-bytes 200000: $(tr '\n' ' ' <"$T_TMP/sizes.$mode")"
	[ "$sum" = 40 ] || fail "$mode: $sum of 40 events delivered"
	note "$mode: 40 events with 60 KB headers in batches of at most $max under --batch-bytes 200000"
done
# One event larger than relay.batch_bytes still goes, alone.
q "INSERT INTO pgoutbox.outbox (topic, type, payload, headers) SELECT 't', 'x', '{}', jsonb_build_object('h', repeat('h', 60000)) FROM generate_series(1, 3)"
: >"$T_TMP/sizes.one"
start_relay "$T_TMP/out.one" --batch-bytes 1024 --sink exec --exec "cat >/dev/null; echo \$PGOUTBOX_BATCH_SIZE >> $T_TMP/sizes.one"
wait_until 30 '[ "$(pending)" = 0 ]'
stop_relay "$RELAY_PID"
[ "$(sort -u "$T_TMP/sizes.one")" = 1 ] || fail "events over relay.batch_bytes: batches $(tr '\n' ' ' <"$T_TMP/sizes.one")"
