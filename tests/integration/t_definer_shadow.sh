# SECURITY DEFINER functions cannot be fooled by a caller's temporary
# tables: with search_path = pg_catalog alone, PostgreSQL searched the
# caller's temporary schema first, so a temp table pg_locks, pg_class or
# pg_stat_activity took the catalog's place inside functions that run as
# their owner.  The producer role of docs/security.md can run none of the relay
# functions (claim_floor() was open to PUBLIC); the relay role, which can,
# gets the same results with the temp tables as without them.
. "$(dirname "$0")/../lib.sh"
t_db
P=t_shadow_producer R=t_shadow_relay
psql -XAtq -v ON_ERROR_STOP=1 "$DATABASE_URL" >/dev/null <<SQL
CREATE ROLE $P LOGIN;
GRANT USAGE ON SCHEMA pgoutbox TO $P;
GRANT EXECUTE ON FUNCTION pgoutbox.send(text, text, text, jsonb, jsonb) TO $P;
CREATE ROLE $R LOGIN;
GRANT USAGE ON SCHEMA pgoutbox TO $R;
GRANT SELECT ON pgoutbox.migrations TO $R;
GRANT SELECT, INSERT, UPDATE, DELETE ON pgoutbox.outbox TO $R;
GRANT SELECT, INSERT, UPDATE ON pgoutbox.dead_letters TO $R;
GRANT SELECT ON pgoutbox.shard_leases TO $R;
GRANT EXECUTE ON FUNCTION pgoutbox.rebalance(text, text, text, interval),
                          pgoutbox.relay_beat(text, text, text, interval, boolean),
                          pgoutbox.leave(text, text),
                          pgoutbox.unarchive(text, bigint[]),
                          pgoutbox.claim_floor(text, bigint, bigint, text[]),
                          pgoutbox.maintain(), pgoutbox.health(interval, bigint) TO $R;
-- a consumer's (pgoutbox consume maintains the inbox)
GRANT EXECUTE ON FUNCTION pgoutbox.inbox_maintain(interval) TO $R;
SQL
base=$DATABASE_URL
url() { echo "${base/user=postgres/user=$1}"; }
# Temporary tables named like the catalog relations the functions read,
# all empty: lock holders, sessions, partitions that are not there.
FAKE="CREATE TEMP TABLE pg_locks AS SELECT * FROM pg_catalog.pg_locks LIMIT 0;
CREATE TEMP TABLE pg_stat_activity AS SELECT * FROM pg_catalog.pg_stat_activity LIMIT 0;
CREATE TEMP TABLE pg_class AS SELECT * FROM pg_catalog.pg_class LIMIT 0;
CREATE TEMP TABLE pg_inherits AS SELECT * FROM pg_catalog.pg_inherits LIMIT 0;
CREATE TEMP TABLE pg_database AS SELECT * FROM pg_catalog.pg_database LIMIT 0;"
as() { psql -XAtq -v ON_ERROR_STOP=1 "$(url "$1")" -c "$2"; }
shadowed() { psql -XAtq -v ON_ERROR_STOP=1 "$(url "$1")" -c "$FAKE" -c "$2"; }

# The producer: none of the relay functions, not even claim_floor().
[ "$(q "SELECT has_function_privilege('public', 'pgoutbox.claim_floor(text,bigint,bigint,text[])', 'EXECUTE')")" = f ] ||
	fail "claim_floor() is executable by PUBLIC"
for call in "pgoutbox.claim_floor('outbox', 0, NULL, NULL)" "pgoutbox.rebalance('outbox', 'p', 'ordered')" \
	"pgoutbox.leave('outbox', 'p')" "pgoutbox.health()" "pgoutbox.maintain()" "pgoutbox.inbox_maintain()"; do
	shadowed $P "SELECT * FROM $call" >/dev/null 2>"$T_TMP/p.err" && fail "the producer ran $call"
	grep -q 'permission denied for function' "$T_TMP/p.err" || fail "producer, $call: $(cat "$T_TMP/p.err")"
done
[ "$(shadowed $P "SELECT pgoutbox.send('t', 'k', 'x', '{\"n\": 1}') > 0")" = t ] || fail "the producer cannot send with temp tables"

# A writer holds the outbox open: an uncommitted event, its lock.
psql -XAtq "$base application_name=t_shadow_writer" -c "BEGIN" -c "SELECT pgoutbox.send('t', 'k', 'x', '{\"n\": 2}')" \
	-c "SELECT pg_sleep(120)" >/dev/null 2>&1 &
PIDS+=("$!")
wait_until 20 '[ "$(q "SELECT count(*) FROM pg_locks WHERE relation = '\''pgoutbox.outbox'\''::regclass AND mode = '\''RowExclusiveLock'\''")" = 1 ]'
wpid=$(q "SELECT pid FROM pg_stat_activity WHERE application_name = 't_shadow_writer'")

# claim_floor(): the writer is seen, so the floor waits for its event.
FLOOR="WITH a AS (SELECT * FROM pgoutbox.claim_floor('outbox', 0, NULL, NULL))
SELECT b.new_floor, b.new_line IS NOT NULL, cardinality(a.new_writers)
  FROM a, pgoutbox.claim_floor('outbox', a.new_floor, a.new_line, a.new_writers) b"
plain=$(as $R "$FLOOR")
[ "$plain" = "0|t|1" ] || fail "claim_floor() with a writer: $plain"
[ "$(shadowed $R "$FLOOR")" = "$plain" ] || fail "claim_floor() with temp tables: $(shadowed $R "$FLOOR"), not $plain"

# health(): the writer's open transaction holds the xmin horizon.
HEALTH="SELECT count(*) FROM pgoutbox.health('0 seconds') WHERE kind = 'xmin' AND subject LIKE 'pid $wpid %'"
[ "$(as $R "$HEALTH")" = 1 ] || fail "health() does not see the writer"
[ "$(shadowed $R "$HEALTH")" = 1 ] || fail "health() with temp tables does not see the writer"
q "SELECT pg_terminate_backend($wpid)" >/dev/null

# rebalance(): a live member m0 holds every shard; a second member must
# neither forget it nor itself.
psql -XAtq "$(url $R) application_name=t_shadow_m0" -c "SELECT count(*) FROM pgoutbox.rebalance('outbox', 'm0', 'ordered')" \
	-c "SELECT pg_sleep(120)" >/dev/null 2>&1 &
PIDS+=("$!")
wait_until 20 '[ "$(lease_count)" = 64 ]'
[ "$(shadowed $R "SELECT count(*) FROM pgoutbox.rebalance('outbox', 'm1', 'ordered')")" = 0 ] || fail "m1 took shards m0 holds"
members=$(q "SELECT string_agg(member, ' ' ORDER BY member) FROM pgoutbox.relays WHERE queue = 'outbox'")
[ "$members" = "m0 m1" ] || fail "rebalance() with temp tables left members: '$members', not 'm0 m1'"

# leave(): the shards taken are released.
q "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 't_shadow_m0'" >/dev/null
wait_until 20 '[ "$(lease_count)" = 0 ]'
left=$(shadowed $R "SELECT count(*) FROM pgoutbox.rebalance('outbox', 'm1', 'ordered');
SELECT pgoutbox.leave('outbox', 'm1');
SELECT count(*) FROM pg_catalog.pg_locks WHERE locktype = 'advisory' AND objsubid = 2
   AND classid = pgoutbox.lease_ns('outbox')::oid AND pid = pg_backend_pid()" | tr '\n' ' ')
[ "$left" = "64  0 " ] || fail "rebalance() then leave() with temp tables: '$left' (shards taken, void, shards still held)"

# inbox_maintain() and maintain(): partitions past retention go.
part() { q "CREATE TABLE pgoutbox.$1_$2 PARTITION OF pgoutbox.$1 FOR VALUES FROM ('$3 00:00:00+00') TO ('$3 00:00:00+00'::timestamptz + interval '1 day')"; }
part inbox 20200101 2020-01-01
[ "$(shadowed $R "SELECT dropped FROM pgoutbox.inbox_maintain('7 days')")" = 1 ] || fail "inbox_maintain() with temp tables dropped nothing"
[ "$(q "SELECT to_regclass('pgoutbox.inbox_20200101') IS NULL")" = t ] || fail "inbox_20200101 is still there"
"$PGO_BIN" maintain --retention archive --days 3 >/dev/null
part outbox_archive 20200101 2020-01-01
part inbox 20200102 2020-01-02
[ "$(shadowed $R "SELECT done, dropped FROM pgoutbox.maintain()")" = "t|2" ] || fail "maintain() with temp tables did not drop the 2 old partitions"
[ "$(q "SELECT count(*) FROM pg_class WHERE relname IN ('outbox_archive_20200101', 'inbox_20200102')")" = 0 ] ||
	fail "old partitions left: $(q "SELECT relname FROM pg_class WHERE relname LIKE '%2020010%'")"

# send() sets no search path of its own (sql/018_send_lean.sql): a
# producer that puts a schema of its own before pg_catalog must not get
# its look-alike operators or functions run as send()'s owner, neither in
# send() nor in the outbox's trigger inside it, on the quiet path nor on
# the NOTIFY one, nor in an error's message.
q "CREATE SCHEMA evil AUTHORIZATION $P" >/dev/null
psql -XAtq -v ON_ERROR_STOP=1 "$(url $P)" >/dev/null <<'SQL'
CREATE TABLE evil.ran (who text, what text);
CREATE FUNCTION evil.note(what text) RETURNS void LANGUAGE sql
    AS $$ INSERT INTO evil.ran VALUES (current_user, what) $$;
CREATE FUNCTION evil.eq(a text, b text) RETURNS boolean LANGUAGE sql
    AS $$ SELECT evil.note('='); SELECT a OPERATOR(pg_catalog.=) b $$;
CREATE FUNCTION evil.ne(a text, b text) RETURNS boolean LANGUAGE sql
    AS $$ SELECT evil.note('<>'); SELECT a OPERATOR(pg_catalog.<>) b $$;
CREATE FUNCTION evil.gt(a integer, b integer) RETURNS boolean LANGUAGE sql
    AS $$ SELECT evil.note('>'); SELECT a OPERATOR(pg_catalog.>) b $$;
CREATE FUNCTION evil.cat(a text, b name) RETURNS text LANGUAGE sql
    AS $$ SELECT evil.note('||'); SELECT a OPERATOR(pg_catalog.||) b::text $$;
CREATE OPERATOR evil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = evil.eq);
CREATE OPERATOR evil.<> (LEFTARG = text, RIGHTARG = text, FUNCTION = evil.ne);
CREATE OPERATOR evil.> (LEFTARG = integer, RIGHTARG = integer, FUNCTION = evil.gt);
CREATE OPERATOR evil.|| (LEFTARG = text, RIGHTARG = name, FUNCTION = evil.cat);
CREATE FUNCTION evil.pg_column_size(jsonb) RETURNS integer LANGUAGE sql
    AS $$ SELECT evil.note('pg_column_size'); SELECT 1 $$;
CREATE FUNCTION evil.jsonb_typeof(jsonb) RETURNS text LANGUAGE sql
    AS $$ SELECT evil.note('jsonb_typeof'); SELECT 'object' $$;
CREATE FUNCTION evil.hashtext(text) RETURNS integer LANGUAGE sql
    AS $$ SELECT evil.note('hashtext'); SELECT 1 $$;
CREATE FUNCTION evil.pg_try_advisory_xact_lock_shared(integer, integer) RETURNS boolean LANGUAGE sql
    AS $$ SELECT evil.note('pg_try_advisory_xact_lock_shared'); SELECT true $$;
CREATE FUNCTION evil.pg_notify(text, text) RETURNS void LANGUAGE sql
    AS $$ SELECT evil.note('pg_notify') $$;
SQL
EVIL="SET search_path = evil, pg_catalog"
ran() { q "SELECT coalesce(string_agg(who || ' ' || what, ', '), '') FROM evil.ran"; }
# The control: unqualified, the look-alikes are what a name means.
[ "$(as $P "$EVIL; SELECT 'a'::text = 'a'::text")" = t ] || fail "control: the look-alike = did not answer"
[ "$(ran)" = "$P =" ] || fail "control: the look-alike = did not run: '$(ran)'"
q "TRUNCATE evil.ran"
# pgoutbox.$1($2) as the producer, the look-alikes first on its path.
call_evil() { psql -XAtq "$(url $P)" -c "$EVIL" -c "SELECT pgoutbox.$1($2)" 2>&1; }
send_evil() { call_evil send "$1"; }
# The quiet path (no relay asleep), then the NOTIFY one (the sleeper
# lock held, as by a sleeping relay).
[ "$(send_evil "'t', 'k', 'x', '{\"n\": 3}'")" -gt 0 ] 2>/dev/null || fail "send() with the look-alikes first: $(send_evil "'t', 'k', 'x', '{}'")"
psql -XAtq "$base application_name=t_shadow_sleeper" -c "SELECT pg_advisory_lock(pgoutbox.wake_ns('outbox'), 0)" \
	-c "SELECT pg_sleep(120)" >/dev/null 2>&1 &
PIDS+=("$!")
wait_until 20 '[ "$(q "SELECT count(*) FROM pg_locks WHERE locktype = '\''advisory'\'' AND granted AND mode = '\''ExclusiveLock'\''")" = 1 ]'
[ "$(send_evil "'t', 'k', 'x', '{\"n\": 4}'")" -gt 0 ] 2>/dev/null || fail "send() notifying, with the look-alikes first"
# Each check's error, with its message (psql fails: the output is read).
refused() { # function, arguments, the error's pattern
	local out
	out=$(call_evil "$1" "$2" || true)
	grep -q "$3" <<<"$out" || fail "$1($2) with the look-alikes first: $(head -c 300 <<<"$out")"
}
refused send "'', 'k', 'x', '{}'" 'topic must not be empty'
refused send "'t', 'k', 'x', NULL" 'payload must not be NULL'
refused send "'t', 'k', 'x', '{}', '[1]'" 'headers must be a JSON object, not array'
refused send "'t', 'k', 'x', jsonb_build_object('s', repeat('x', 1100000))" 'payload is [0-9]* bytes, the limit is 1048576'
[ -z "$(ran)" ] || fail "send() ran the caller's look-alikes: $(ran)"
[ "$(q "SELECT count(*) FROM pgoutbox.outbox WHERE payload->>'n' IN ('3', '4')")" = 2 ] || fail "the two events are not in the outbox"
q "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 't_shadow_sleeper'" >/dev/null

# send_to() sets no search path either (step 23): into a table queue of
# its own (the statements after its WAL test) and on its errors, the
# look-alikes run neither.
"$PGO_BIN" queue create tq --kind outbox >/dev/null || fail "queue create tq"
q "GRANT EXECUTE ON FUNCTION pgoutbox.send_to(text, text, text, text, jsonb, jsonb) TO $P" >/dev/null
[ "$(call_evil send_to "'tq', 't', 'k', 'x', '{\"n\": 5}'")" -gt 0 ] 2>/dev/null ||
	fail "send_to() with the look-alikes first: $(call_evil send_to "'tq', 't', 'k', 'x', '{}'")"
refused send_to "'tq', '', 'k', 'x', '{}'" 'send_to: topic must not be empty'
refused send_to "'tq', 't', 'k', 'x', NULL" 'send_to: payload must not be NULL'
refused send_to "'tq', 't', 'k', 'x', '{}', '[1]'" 'send_to: headers must be a JSON object, not array'
refused send_to "'tq', 't', 'k', 'x', jsonb_build_object('s', repeat('x', 1100000))" 'send_to: payload is [0-9]* bytes, the limit is 1048576'
refused send_to "'nope', 't', 'k', 'x', '{}'" 'nope'
[ -z "$(ran)" ] || fail "send_to() ran the caller's look-alikes: $(ran)"
[ "$(q "SELECT count(*) FROM pgoutbox.tq WHERE payload->>'n' = '5'")" = 1 ] || fail "send_to() wrote no row into tq"
