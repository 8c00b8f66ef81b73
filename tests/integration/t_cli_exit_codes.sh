# One table of exit codes (issue 44 item 4), printed by `pgoutbox --help`
# and kept by every command: 0 done, 1 a failure that trying again later
# may fix (PostgreSQL unreachable), 2 what trying again cannot fix until
# something changes (bad flags or input, a schema never migrated or newer
# than the binary, a queue that does not exist; `run` when a child
# refused).  Before `migrate`, status, send, queue, cron and maintain
# exit 2 as relay and worker do.
. "$(dirname "$0")/../lib.sh"
t_db

# expect CODE 'stderr substring' command...: within 60 s.
expect() {
	local want=$1 msg=$2; shift 2
	local rc=0
	timeout 60 "$@" >"$T_TMP/stdout" 2>"$T_TMP/stderr" || rc=$?
	[ "$rc" = "$want" ] || fail "$*: exit $rc, want $want; stderr: $(tail -5 "$T_TMP/stderr")"
	[ -z "$msg" ] || grep -qF -- "$msg" "$T_TMP/stderr" || fail "$*: stderr lacks '$msg': $(tail -5 "$T_TMP/stderr")"
}

"$PGO_BIN" --help >"$T_TMP/help"
grep -q '^Exit status:' "$T_TMP/help" || fail "pgoutbox --help has no exit status table"
for code in 0 1 2; do
	grep -q "^  $code  " "$T_TMP/help" || fail "pgoutbox --help does not explain exit $code"
done

# 0: done.
expect 0 '' "$PGO_BIN" status
expect 0 '' "$PGO_BIN" send --topic t '{}'

# 2: bad flags or input.
expect 2 'unknown option --bogus' "$PGO_BIN" status --bogus
expect 2 'payload is not valid JSON' "$PGO_BIN" send --topic t '{'
expect 2 'unknown subcommand "bogus"' "$PGO_BIN" queue bogus

# 2: a database never migrated, for every command, as the relay's.
psql -XAtq "$(pg_url postgres)" -c "DROP DATABASE IF EXISTS t_cli_exit_empty" -c "CREATE DATABASE t_cli_exit_empty" >/dev/null
empty=$(pg_url t_cli_exit_empty)
expect 2 'run `pgoutbox migrate`' "$PGO_BIN" relay --db "$empty"
expect 2 'run `pgoutbox migrate`' "$PGO_BIN" status --db "$empty"
expect 2 'run `pgoutbox migrate`' "$PGO_BIN" status --json --db "$empty"
expect 2 'run `pgoutbox migrate`' "$PGO_BIN" send --db "$empty" --topic t '{}'
expect 2 'run `pgoutbox migrate`' "$PGO_BIN" queue list --db "$empty"
expect 2 'run `pgoutbox migrate`' "$PGO_BIN" queue enqueue jobs '{}' --db "$empty"
expect 2 'run `pgoutbox migrate`' "$PGO_BIN" cron list --db "$empty"
expect 2 'run `pgoutbox migrate`' "$PGO_BIN" maintain --db "$empty"

# 2: a schema newer than this binary.
q "INSERT INTO pgoutbox.migrations (version, name) VALUES (999, '999_future')"
expect 2 'upgrade pgoutbox' "$PGO_BIN" migrate
expect 2 'upgrade pgoutbox' "$PGO_BIN" relay
expect 2 'upgrade pgoutbox' "$PGO_BIN" status
expect 2 'upgrade pgoutbox' "$PGO_BIN" queue list
q "DELETE FROM pgoutbox.migrations WHERE version = 999"

# 2: a queue that does not exist; run stops and says 2 too.
expect 2 'is not a queue' "$PGO_BIN" relay --queue nosuch
printf '[worker]\nqueue = nosuch\nexec_command = true\n' >"$T_TMP/run.ini"
expect 2 'cannot run with this configuration' "$PGO_BIN" run --no-relay --config "$T_TMP/run.ini"

# 1: PostgreSQL unreachable, for the one-shot commands.
down="host=127.0.0.1 port=1 connect_timeout=2"
expect 1 'cannot connect' "$PGO_BIN" status --db "$down"
expect 1 'cannot connect' "$PGO_BIN" send --db "$down" --topic t '{}'
expect 1 'cannot connect' "$PGO_BIN" queue list --db "$down"
expect 1 'cannot connect' "$PGO_BIN" migrate --db "$down"
