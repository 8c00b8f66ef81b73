# `pgoutbox run` with [console] enabled = true serves one console: on the
# metrics address of its first child (the relay's PORT), not one per
# child; the worker's PORT+1 and the scheduler's PORT+2 serve only their
# metrics.  One console connects to PostgreSQL, and the log says once
# that it serves.
. "$(dirname "$0")/../lib.sh"
t_db
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# Three consecutive free ports.
for _ in $(seq 50); do
	base=$(free_port)
	python3 - "$base" <<'PY' && break
import socket, sys
b = int(sys.argv[1])
for p in (b, b + 1, b + 2):
    s = socket.socket(); s.bind(("127.0.0.1", p)); s.close()
PY
done
code_of() { curl -s -o /dev/null -w '%{http_code}' "$1"; }

q "SELECT pgoutbox.create_queue('jobs')" >/dev/null
cat >"$T_TMP/run.ini" <<INI
[relay]
sink = stdout
stats_interval = 0
[worker]
queue = jobs
exec_command = cat >/dev/null
[cron]
enabled = on
[metrics]
listen = 127.0.0.1:$base
[console]
enabled = true
INI
"$PGO_BIN" run --config "$T_TMP/run.ini" >"$T_TMP/run.out" 2>"$T_TMP/run.log" &
run_pid=$!
PIDS+=("$run_pid")
R=http://127.0.0.1:$base W=http://127.0.0.1:$((base + 1)) C=http://127.0.0.1:$((base + 2))
for u in "$R" "$W" "$C"; do
	wait_until 30 "[ \"\$(code_of $u/readyz)\" = 200 ]"
done
# The relay's port serves the pages and their API.
[ "$(code_of "$R/")" = 200 ] || fail "$R/ is not the console: $(code_of "$R/")"
wait_until 30 'curl -s "$R/api/overview" | qgrep "\"name\":\"jobs\""'
# The others serve their metrics only.
for u in "$W" "$C"; do
	[ "$(code_of "$u/")" = 404 ] || fail "$u/ answers $(code_of "$u/"): a second console"
	[ "$(code_of "$u/api/overview")" = 404 ] || fail "$u/api/overview answers: a second console"
	grep -q '^pgoutbox_' <(curl -s "$u/metrics") || fail "$u/metrics"
done
n=$(grep -c 'console on the metrics address' "$T_TMP/run.log" || true)
[ "$n" = 1 ] || fail "$n consoles started: $(grep 'console on' "$T_TMP/run.log")"
conns=$(q "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgoutbox console'")
[ "$conns" = 1 ] || fail "$conns console connections to PostgreSQL, expected 1"
note "one console, on the relay's port $base; the worker's and the scheduler's serve metrics only"
kill -TERM "$run_pid"
wait "$run_pid" || fail "run exited $? after SIGTERM"
echo ok
