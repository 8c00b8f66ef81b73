# adopt with a wrong map: a missing column, a payload of a wrong type, a
# predicate that does not parse, a table without a primary key, a name
# already taken, an assignment without a pending predicate, an ordered
# relay of a table adopted without shards.  Each gets a clear error and
# exit code 2, and nothing changes (pg_dump of the database compared).
. "$(dirname "$0")/../lib.sh"
t_db
PG_DUMP=$(pg_bindir)/pg_dump
# (pg_dump 15.14+ writes a random \restrict token.)
dump() { "$PG_DUMP" --schema-only --no-owner "$DATABASE_URL" | grep -Ev '^\\(un)?restrict '; }
psql -XAtq -v ON_ERROR_STOP=1 "$DATABASE_URL" >/dev/null <<'SQL'
CREATE TABLE outbox_events (id bigserial PRIMARY KEY, aggregate_id text NOT NULL, event_type text NOT NULL,
                            payload jsonb NOT NULL, status text NOT NULL DEFAULT 'PENDING', created_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE events2 (id bigserial PRIMARY KEY, aggregate_id text NOT NULL, event_type text NOT NULL, payload jsonb NOT NULL, status text NOT NULL DEFAULT 'PENDING');
CREATE TABLE counts (id bigserial PRIMARY KEY, aggregatetype text, aggregateid text, type text, payload integer);
CREATE TABLE nopk (id bigint, aggregatetype text, aggregateid text, type text, payload jsonb);
SQL
"$PGO_BIN" adopt public.outbox_events --name taken --topic "'e'" --key aggregate_id --type event_type \
	--pending "status = 'PENDING'" --done "status = 'PUBLISHED'" >/dev/null 2>"$T_TMP/ok" || fail "adopt: $(cat "$T_TMP/ok")"
dump >"$T_TMP/before"
# expect_error "what stderr must say" adopt args...
expect_error() {
	local want=$1 rc=0; shift
	"$PGO_BIN" "$@" >"$T_TMP/out" 2>"$T_TMP/err" || rc=$?
	[ "$rc" = 2 ] || fail "$* exited $rc, not 2: $(cat "$T_TMP/out" "$T_TMP/err")"
	grep -qF -- "$want" "$T_TMP/err" || fail "$*: the error does not say \"$want\": $(cat "$T_TMP/err")"
	note "$(head -1 "$T_TMP/err")"
	dump >"$T_TMP/after"
	diff "$T_TMP/before" "$T_TMP/after" >&2 || fail "$*: the database changed"
}
expect_error '--topic: events2 has no column aggregatetype; pass --topic COLUMN' adopt public.events2 --name e2
expect_error '--key: events2 has no column nope' \
	adopt public.events2 --name e2 --topic "'e'" --key nope --type event_type --pending "status = 'PENDING'" --done "status = 'PUBLISHED'"
expect_error '--payload: payload is of type integer; it must be json, jsonb, text or bytea' adopt public.counts --name c
expect_error '--pending: "sent_at IS" does not work on public.events2: syntax error' \
	adopt public.events2 --name e2 --topic "'e'" --key aggregate_id --type event_type --pending "sent_at IS" --done "status = 'PUBLISHED'"
expect_error '--pending: status is of type text; it must be a condition' \
	adopt public.events2 --name e2 --topic "'e'" --key aggregate_id --type event_type --pending "status" --done "status = 'PUBLISHED'"
expect_error '--done: "published" is not delete nor an assignment' \
	adopt public.events2 --name e2 --topic "'e'" --key aggregate_id --type event_type --pending "status = 'PENDING'" --done "published"
expect_error 'marks rows, so --pending must say which rows are not sent yet' \
	adopt public.events2 --name e2 --topic "'e'" --key aggregate_id --type event_type --done "status = 'PUBLISHED'"
expect_error 'public.nopk has no primary key' adopt public.nopk --name n
expect_error 'the name "taken" is taken' adopt public.counts --name taken --payload "to_jsonb(payload)"
expect_error 'no table public.missing' adopt public.missing --name m
expect_error 'name "Bad-Name" must start with a lower-case letter' adopt public.events2 --name Bad-Name
expect_error 'public.outbox_events is adopted already, as "taken"' adopt public.outbox_events --name again
expect_error 'nothing is adopted as "nope"' unadopt nope
# A relay in ordered mode of a table adopted with --shards 0.
"$PGO_BIN" adopt public.counts --name counts --payload "to_jsonb(payload)" --shards 0 >/dev/null 2>"$T_TMP/ok" || fail "adopt --shards 0: $(cat "$T_TMP/ok")"
rc=0
"$PGO_BIN" relay --queue counts --mode ordered --sink stdout >/dev/null 2>"$T_TMP/err" || rc=$?
[ "$rc" = 2 ] || fail "an ordered relay of a table without shards exited $rc: $(cat "$T_TMP/err")"
grep -q 'adopted with --shards 0' "$T_TMP/err" || fail "ordered relay without shards: $(cat "$T_TMP/err")"
true
# Debezium-style producers that delete the row in the transaction that
# inserts it: adopt says that such events cannot be relayed.
psql -XAtq -v ON_ERROR_STOP=1 "$DATABASE_URL" >/dev/null <<'SQL'
CREATE TABLE dbz (id uuid PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text NOT NULL, type text NOT NULL, payload jsonb);
CREATE PROCEDURE dbz_write() LANGUAGE plpgsql AS $$
DECLARE
    u uuid;
BEGIN
    FOR i IN 1..5 LOOP
        u := gen_random_uuid();
        INSERT INTO dbz VALUES (u, 'order', 'o' || i, 'OrderCreated', '{}');
        DELETE FROM dbz WHERE id = u;
        COMMIT;
    END LOOP;
END $$;
CALL dbz_write();
SELECT pg_stat_force_next_flush();
SQL
wait_until 20 '[ "$(q "SELECT n_tup_del FROM pg_stat_user_tables WHERE relname = '"'dbz'"'")" -ge 5 ]'
"$PGO_BIN" adopt public.dbz --name dbz >"$T_TMP/dbz" 2>&1 || fail "adopt dbz: $(cat "$T_TMP/dbz")"
grep -q "WARNING: every row ever inserted into public.dbz was deleted again" "$T_TMP/dbz" || fail "no warning: $(cat "$T_TMP/dbz")"
grep -q "pgoutbox cannot relay such events from the table; adopt it with --capture wal" "$T_TMP/dbz" || fail "the warning does not say what it means: $(cat "$T_TMP/dbz")"
note "$(grep WARNING "$T_TMP/dbz" | cut -c1-160)..."
true
