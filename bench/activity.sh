#!/usr/bin/env bash
# activity.sh URL OUT [INTERVAL] — samples what the server is doing while
# a workload runs, until it gets SIGTERM (or SIGINT): every INTERVAL
# seconds (0.1), one psql session writes tab-separated lines to OUT, each
# starting with the epoch time and a kind:
#
#   act   pid backend_type application_name state wait_event_type
#         wait_event ms_in_query query   (pg_stat_activity: the relay's
#         and every non-idle session, and the background processes)
#   bgw   checkpoints_timed checkpoints_req checkpoint_write_time
#         checkpoint_sync_time buffers_checkpoint buffers_backend
#         buffers_backend_fsync wal_bytes  (pg_stat_bgwriter, cumulative;
#         the WAL position in bytes)
#   vac   pid relation phase heap_blks_total heap_blks_scanned
#         heap_blks_vacuumed index_vacuum_count  (pg_stat_progress_vacuum)
#   tab   n_live_tup n_dead_tup autovacuum_count autoanalyze_count
#         seq_scan idx_scan  (pg_stat_user_tables of pgoutbox.outbox)
#
# and, at the same pace, lines to OUT.sched of how long processes on
# this host waited for a CPU (the kernel's counters, cumulative):
#
#   sched pid comm cpu_ns run_delay_ns  (/proc/PID/schedstat of every
#         postgres and pgoutbox process: time on a CPU, time runnable
#         but waiting for one)
#   psi   some_us  (/proc/pressure/cpu: time some task waited for a CPU)
#
# bench/activity.py reads it beside the workload's windows and relay log.
set -uo pipefail
URL=${1:?usage: activity.sh URL OUT [INTERVAL]}
OUT=${2:?usage: activity.sh URL OUT [INTERVAL]}
EVERY=${3:-0.1}

# One statement per sample, so that each line's time is the sample's.
read -r -d '' Q <<'SQL'
WITH now AS (SELECT extract(epoch FROM clock_timestamp())::numeric(16,3) AS t)
SELECT concat_ws(E'\t', (SELECT t FROM now), 'act', a.pid, a.backend_type,
       a.application_name, coalesce(a.state, ''),
       coalesce(a.wait_event_type, ''), coalesce(a.wait_event, ''),
       coalesce((extract(epoch FROM clock_timestamp() - a.query_start)
                 * 1000)::int, 0),
       left(regexp_replace(a.query, '\s+', ' ', 'g'), 100))
  FROM pg_stat_activity a
 WHERE a.pid <> pg_backend_pid()
   AND (a.application_name LIKE 'pgoutbox relay%'
        OR a.backend_type <> 'client backend'
        OR a.state NOT IN ('idle'))
   AND a.backend_type NOT IN ('logical replication launcher',
                              'autovacuum launcher', 'archiver')
UNION ALL
SELECT concat_ws(E'\t', (SELECT t FROM now), 'bgw', checkpoints_timed,
       checkpoints_req, checkpoint_write_time, checkpoint_sync_time,
       buffers_checkpoint, buffers_backend, buffers_backend_fsync,
       pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0'))
  FROM pg_stat_bgwriter
UNION ALL
SELECT concat_ws(E'\t', (SELECT t FROM now), 'vac', v.pid,
       v.relid::regclass, replace(v.phase, ' ', '_'), v.heap_blks_total, v.heap_blks_scanned,
       v.heap_blks_vacuumed, v.index_vacuum_count)
  FROM pg_stat_progress_vacuum v
UNION ALL
SELECT concat_ws(E'\t', (SELECT t FROM now), 'tab', n_live_tup, n_dead_tup,
       autovacuum_count, autoanalyze_count, seq_scan, idx_scan)
  FROM pg_stat_user_tables
 WHERE schemaname = 'pgoutbox' AND relname = 'outbox';
SQL
Q=$(tr '\n' ' ' <<<"$Q")

stop=0
trap 'stop=1' TERM INT
# One pass over /proc with builtins only (no process started per sample).
sched() {
	local t=$EPOCHREALTIME p c a b x
	if read -r x x x x x 2>/dev/null </proc/pressure/cpu; then
		printf '%s\tpsi\t%s\n' "$t" "${x#total=}"
	fi
	for p in /proc/[0-9]*; do
		read -r c 2>/dev/null <"$p/comm" || continue
		case $c in postgres | pgoutbox*) ;; *) continue ;; esac
		read -r a b x 2>/dev/null <"$p/schedstat" || continue
		printf '%s\tsched\t%s\t%s\t%s\t%s\n' "$t" "${p#/proc/}" "$c" "$a" "$b"
	done
}

exec 3> >(exec psql -XAtq -v ON_ERROR_STOP=0 "$URL" >"$OUT" 2>"$OUT.err")
reader=$!
exec 4>"$OUT.sched"
while [ $stop = 0 ]; do
	printf '%s\n' "$Q" >&3 || break
	sched >&4
	sleep "$EVERY" &
	wait $! 2>/dev/null
done
# End of input: psql writes what it has and exits.
exec 3>&- 4>&-
wait "$reader" 2>/dev/null
exit 0
