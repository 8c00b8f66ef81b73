# Every long-running command serves metrics.listen: `pgoutbox run` gives
# the relay PORT, the worker PORT+1 and the cron scheduler PORT+2; their
# counters match what happened (jobs done, ticks fired), and /readyz and
# /healthz answer.  `pgoutbox consume` serves its own.  Each scrape passes
# `promtool check metrics`.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../redis.sh"
trap 'cleanup_pids; redis_stop' EXIT
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
lint() {
	curl -s "$1/metrics" >"$T_TMP/scrape.$2"
	promtool check metrics <"$T_TMP/scrape.$2" >"$T_TMP/lint.$2" 2>&1 || fail "$2: promtool check metrics: $(cat "$T_TMP/lint.$2")"
	[ -s "$T_TMP/lint.$2" ] && fail "$2: promtool check metrics complains: $(cat "$T_TMP/lint.$2")"
	return 0
}

q "SELECT pgoutbox.create_queue('jobs')" >/dev/null
q "SELECT pgoutbox.enqueue('jobs', jsonb_build_object('i', i)) FROM generate_series(1, 25) i" >/dev/null
"$PGO_BIN" cron add beat '* * * * * *' --queue jobs --overlap allow >/dev/null || fail "cron add"
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
INI
"$PGO_BIN" run --config "$T_TMP/run.ini" >"$T_TMP/run.out" 2>"$T_TMP/run.log" &
run_pid=$!
PIDS+=("$run_pid")
R=http://127.0.0.1:$base W=http://127.0.0.1:$((base + 1)) C=http://127.0.0.1:$((base + 2))
for u in "$R" "$W" "$C"; do
	wait_until 30 "[ \"\$(code_of $u/readyz)\" = 200 ]"
	[ "$(code_of "$u/healthz")" = 200 ] || fail "$u/healthz"
done
# 25 jobs, then a tick a second: the worker's done count passes 25 and
# the scheduler's fired count grows.
fired_ticks() { curl -s "$C/metrics" | awk '/^pgoutbox_cron_ticks_total\{.*outcome="fired"/ {print $2}'; }
wait_until 30 '[ "$(fired_ticks)" -ge 2 ]'
fired=$(fired_ticks)
done_jobs() { curl -s "$W/metrics" | awk '/^pgoutbox_worker_jobs_total\{.*outcome="done"/ {print $2}'; }
wait_until 30 '[ "$(done_jobs)" -ge 25 ]'
db_done=$(q "SELECT count(*) FROM pgoutbox.cron_history WHERE outcome = 'fired'" 2>/dev/null || echo "?")
curl -s "$W/metrics" | qgrep '^pgoutbox_worker_job_duration_seconds_count{queue="jobs"' || fail "no job durations"
grep -q '^pgoutbox_events_published_total' <(curl -s "$R/metrics") || fail "the relay's port does not serve the relay"
# The ordered relay's two connections hold the 64 shards between them.
owned() { curl -s "$R/metrics" | awk '/^pgoutbox_shards_owned\{/ {print $2}'; }
wait_until 30 '[ "$(owned)" = 64 ]'
takeovers=$(curl -s "$R/metrics" | awk '/^pgoutbox_lease_takeovers_total\{/ {print $2}')
# First grants and the share-out between its connections take over
# nothing from another relay (t_lease_takeovers.sh).
[ "$takeovers" = 0 ] || fail "lease takeovers $takeovers, expected 0: the 64 first leases are no takeovers"
for u in R W C; do lint "${!u}" "$u"; done
note "run: relay :$base, worker :$((base + 1)) (done $(done_jobs)), cron :$((base + 2)) (fired $fired, history $db_done); promtool clean"
kill -TERM "$run_pid"
wait "$run_pid" || fail "run exited $? after SIGTERM"

# pgoutbox consume.
redis_start "$T_TMP/redis"
q "CREATE TABLE applied (id bigint PRIMARY KEY)"
q "CREATE FUNCTION apply_msg(p jsonb) RETURNS void LANGUAGE sql AS \$\$ INSERT INTO applied VALUES ((p->>'n')::bigint) \$\$"
for i in 1 2 3 2; do rcli XADD s1 '*' id "$i" topic t type x payload "{\"n\":$i}" headers '{}' created_at now >/dev/null; done
cport=$(free_port)
"$PGO_BIN" consume --redis "$REDIS_URL" --stream s1 --group g1 --sql apply_msg \
	--metrics-listen "127.0.0.1:$cport" >"$T_TMP/c.out" 2>"$T_TMP/c.log" &
cpid=$!
PIDS+=("$cpid")
K=http://127.0.0.1:$cport
wait_until 30 "[ \"\$(code_of $K/readyz)\" = 200 ]"
msgs() { curl -s "$K/metrics" | awk -v o="$1" '$1 ~ "^pgoutbox_consumer_messages_total\\{.*outcome=\"" o "\"" {print $2}'; }
wait_until 30 '[ "$(msgs processed)" = 3 ] && [ "$(msgs duplicate)" = 1 ]'
lint "$K" K
redis_stop
wait_until 30 "[ \"\$(code_of $K/readyz)\" = 503 ]"
note "consume: processed 3, duplicate 1; Redis stopped: /readyz $(curl -s $K/readyz)"
kill -TERM "$cpid"
wait "$cpid" || fail "consume exited $? after SIGTERM"
