# Bad input gets a clear error naming what is wrong, a non-zero exit, and
# nothing written: config key/value/file line, flags, an unreachable
# database, a payload that is not JSON, a schema newer than the binary.
. "$(dirname "$0")/../lib.sh"
t_db

# expect_err EXIT_CODE 'message substring' command...
expect_err() {
	local want=$1 msg=$2; shift 2
	local rc=0
	"$@" >"$T_TMP/stdout" 2>"$T_TMP/stderr" || rc=$?
	[ "$rc" = "$want" ] || fail "$*: exit $rc, want $want; stderr: $(cat "$T_TMP/stderr")"
	grep -qF -- "$msg" "$T_TMP/stderr" || fail "$*: stderr lacks '$msg': $(cat "$T_TMP/stderr")"
}

printf '[relay]\nbatch = 100\nbach = 5\n' >"$T_TMP/typo.ini"
expect_err 2 'typo.ini:3' "$PGO_BIN" relay --config "$T_TMP/typo.ini"
expect_err 2 'relay.batch' "$PGO_BIN" relay --config "$T_TMP/typo.ini"
printf '[relay]\nbatch = lots\n' >"$T_TMP/bad.ini"
expect_err 2 'bad.ini:2' "$PGO_BIN" relay --config "$T_TMP/bad.ini"
expect_err 2 'out of range' "$PGO_BIN" relay --batch 0
expect_err 2 '--poll-interval' "$PGO_BIN" relay --poll-interval 30
expect_err 2 'unknown option --bogus' "$PGO_BIN" relay --bogus
expect_err 2 'needs sink.exec_command' "$PGO_BIN" relay --sink exec
expect_err 2 'no-such.ini' "$PGO_BIN" relay --config "$T_TMP/no-such.ini"
PGOUTBOX_RELAY_BACH=3 expect_err 2 'PGOUTBOX_RELAY_BACH' "$PGO_BIN" relay
expect_err 2 'unknown command' "$PGO_BIN" relya

# Unreachable database: a clear error from the one-shot commands.
expect_err 1 'cannot connect' "$PGO_BIN" send --db "host=127.0.0.1 port=1 connect_timeout=2" --topic t '{}'
expect_err 1 'cannot connect' "$PGO_BIN" migrate --db "postgresql://nobody@127.0.0.1:1/x?connect_timeout=2"

# Payloads: not JSON, headers not an object, too large.  Nothing written.
expect_err 2 'payload is not valid JSON: line 1' "$PGO_BIN" send --topic t '{"a": }'
expect_err 2 '--headers must be a JSON object' "$PGO_BIN" send --topic t --headers '[1]' '{}'
expect_err 2 'missing argument' "$PGO_BIN" send --topic t
expect_err 2 '--topic is required' "$PGO_BIN" send '{}'
head -c 1100000 /dev/zero | tr '\0' 'a' | sed 's/^/"/; s/$/"/' >"$T_TMP/big.json"
expect_err 2 'payload is over 1048576 bytes' sh -c "\"$PGO_BIN\" send --topic t - < '$T_TMP/big.json'"
[ "$(pending)" = 0 ] || fail "bad input wrote events"
# The SQL API refuses too, with a message.
rc=0; out=$(q "SELECT pgoutbox.send('', NULL, 'x', '{}')" 2>&1) || rc=$?
[ "$rc" != 0 ] && grep -q 'topic must not be empty' <<<"$out" || fail "send('') gave: $out"
rc=0; out=$(q "SELECT pgoutbox.send('t', NULL, 'x', '{\"a\":1', '{}')" 2>&1) || rc=$?
[ "$rc" != 0 ] && grep -q 'invalid input syntax for type json' <<<"$out" || fail "bad json gave: $out"
rc=0; out=$(q "SELECT pgoutbox.send('t', NULL, 'x', '{}', '[]')" 2>&1) || rc=$?
[ "$rc" != 0 ] && grep -q 'headers must be a JSON object' <<<"$out" || fail "array headers gave: $out"
[ "$(pending)" = 0 ] || fail "bad input wrote events"

# Schema newer than the binary: migrate refuses and changes nothing, the
# relay and send refuse too.
q "INSERT INTO pgoutbox.migrations (version, name) VALUES (999, '999_future')"
before=$(q "SELECT count(*) FROM pg_class WHERE relnamespace = 'pgoutbox'::regnamespace")
expect_err 2 'schema is version 999' "$PGO_BIN" migrate
grep -q 'upgrade pgoutbox' "$T_TMP/stderr" || fail "no advice: $(cat "$T_TMP/stderr")"
[ "$(q "SELECT count(*) FROM pg_class WHERE relnamespace = 'pgoutbox'::regnamespace")" = "$before" ] || fail "migrate changed a newer schema"
expect_err 2 'schema is version 999' timeout 20 "$PGO_BIN" relay
expect_err 2 'schema is version 999' "$PGO_BIN" status
q "DELETE FROM pgoutbox.migrations WHERE version = 999"

# A database without the schema: status says to migrate.
psql -XAtq "$(pg_url postgres)" -c "DROP DATABASE IF EXISTS t_bad_input_empty" -c "CREATE DATABASE t_bad_input_empty"
expect_err 2 'run `pgoutbox migrate`' "$PGO_BIN" status --db "$(pg_url t_bad_input_empty)"

# The bullmq sink from the command line (issue 20 item 9): its keys have
# flags, listed by relay --help with --claim-floor; a missing script names
# every way to set it.
"$PGO_BIN" relay --help >"$T_TMP/help"
for f in --bullmq-script --bullmq-queue --bullmq-prefix --bullmq-attempts --bullmq-remove-on-complete --claim-floor; do
	grep -q -- "$f" "$T_TMP/help" || fail "relay --help lacks $f"
done
expect_err 2 'no-such.lua' "$PGO_BIN" relay --sink bullmq --bullmq-script "$T_TMP/no-such.lua"
expect_err 2 'PGOUTBOX_SINK_BULLMQ_SCRIPT' "$PGO_BIN" relay --sink bullmq
