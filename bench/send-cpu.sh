#!/usr/bin/env bash
# send-cpu.sh BUILD — what a producer's transaction costs the server: the
# backend's CPU time (/proc/PID/schedstat) per one-event transaction, for
# a plain INSERT, the outbox's parts one at a time (bench/send_ablation.sql)
# and send() variants.  A throwaway PostgreSQL, fsync on, synchronous_commit
# off (CPU, not the WAL flush).  N=10000 transactions a variant, ROUNDS=2,
# ONLY=REGEX picks variants by name.
# CPU time is steadier than a rate on a shared host, but still moves by
# +-20 us there: compare variants within a round.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:?usage: bench/send-cpu.sh BUILD_DIR}
case $BUILD in /*) ;; *) BUILD=$(pwd)/$BUILD ;; esac
PGO=$BUILD/pgoutbox
[ -x "$PGO" ] || { echo "send-cpu.sh: $PGO not built" >&2; exit 2; }
TMP=$(mktemp -d /tmp/pgoutbox-sendcpu.XXXXXX); chmod 755 "$TMP"
. scripts/pg.sh
trap 'pg_stop; rm -rf "$TMP"' EXIT
pg_start "$TMP/pg" shared_buffers=256MB fsync=on synchronous_commit=off max_wal_size=4GB >/dev/null
psql -XAtq "$(pg_url postgres)" -c "CREATE DATABASE bench" >/dev/null
URL=$(pg_url bench)
"$PGO" migrate --db "$URL" >/dev/null 2>&1
psql -XAtq "$URL" -f bench/send_ablation.sql >/dev/null
psql -XAtq "$URL" -c "CREATE ROLE producer; GRANT USAGE ON SCHEMA pgoutbox TO producer; GRANT EXECUTE ON FUNCTION pgoutbox.send(text,text,text,jsonb,jsonb) TO producer;" >/dev/null
N=${N:-10000}
P='{"order":12345,"status":"paid","amount":99.5,"customer":"c-000042","items":[1,2,3],"note":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}'
variant() { # name sql
  local name=$1 sql=$2
  [[ $name =~ ${ONLY:-.} ]] || return 0
  python3 - "$N" "$sql" > $TMP/w.sql <<'PY'
import sys
n, sql = int(sys.argv[1]), sys.argv[2]
print("\\o /dev/null")
print("PREPARE s AS " + sql + ";")
for i in range(n):
    print("BEGIN; EXECUTE s('k%d'); COMMIT;" % (i % 100))
PY
  psql -XAtq "$URL" -c "TRUNCATE pgoutbox.outbox, public.bench_plain" -c "CHECKPOINT" >/dev/null
  rm -f $TMP/out.txt
  # the backend pid first, then the workload, in one session
  (echo "SELECT pg_backend_pid();"; echo "\\! sleep 0.3"; cat $TMP/w.sql; echo "\\o"; echo "SELECT 'end';"; echo "\\! sleep 0.3") | psql -XAtq "$URL" > $TMP/out.txt 2>&1 &
  local ps=$!
  local pid=""
  for _ in $(seq 100); do pid=$(head -1 $TMP/out.txt 2>/dev/null || true); [ -n "$pid" ] && break; sleep 0.02; done
  local c0=$(awk '{print $1}' /proc/$pid/schedstat)
  local t0=$(date +%s.%N)
  local c1=$c0
  while kill -0 $ps 2>/dev/null; do c1=$(awk "{print \$1}" /proc/$pid/schedstat 2>/dev/null || echo $c1); sleep 0.05; done
  local t1=$(date +%s.%N)
  python3 -c "t=1e9; print('%-28s %6.1f us CPU/tx   (wall %.1f s)' % ('$name', ($c1-$c0)/t/$N*1e6, $t1-$t0))"
}
for r in $(seq ${ROUNDS:-2}); do
variant plain "INSERT INTO public.bench_plain (payload) VALUES ('$P'::jsonb || jsonb_build_object('k', \$1::text))"
variant wide "INSERT INTO abl.wide (topic,key,type,payload) VALUES ('t', \$1, 'x', '$P'::jsonb)"
variant wide+checks "INSERT INTO abl.checks (topic,key,type,payload) VALUES ('t', \$1, 'x', '$P'::jsonb)"
variant wide+shard_expr2 "INSERT INTO abl.shard_expr2 (topic,key,type,payload) VALUES ('t', \$1, 'x', '$P'::jsonb)"
variant wide+pidx "INSERT INTO abl.pidx (topic,key,type,payload) VALUES ('t', \$1, 'x', '$P'::jsonb)"
variant wide+trig_wake "INSERT INTO abl.trig_wake (topic,key,type,payload) VALUES ('t', \$1, 'x', '$P'::jsonb)"
variant outbox "INSERT INTO pgoutbox.outbox (topic,key,type,payload) VALUES ('t', \$1, 'x', '$P'::jsonb)"
psql -XAtq "$URL" -c "ALTER TABLE pgoutbox.outbox DISABLE TRIGGER outbox_notify" >/dev/null
variant outbox-notrigger "INSERT INTO pgoutbox.outbox (topic,key,type,payload) VALUES ('t', \$1, 'x', '$P'::jsonb)"
variant send-notrigger "SELECT pgoutbox.send('t', \$1, 'x', '$P'::jsonb)"
psql -XAtq "$URL" -c "ALTER TABLE pgoutbox.outbox ENABLE TRIGGER outbox_notify" >/dev/null
variant send "SELECT pgoutbox.send('t', \$1, 'x', '$P'::jsonb)"
variant send_nosec "SELECT abl.send_nosec('t', \$1, 'x', '$P'::jsonb)"
variant send_secdef_nopath "SELECT abl.send_secdef_nopath('t', \$1, 'x', '$P'::jsonb)"
variant send_insonly "SELECT abl.send_insonly('t', \$1, 'x', '$P'::jsonb)"
variant send_q "SELECT abl.send_q('t', \$1, 'x', '$P'::jsonb)"
variant send_sql "SELECT abl.send_sql('t', \$1, 'x', '$P'::jsonb)"
variant send_sql_secdef "SELECT abl.send_sql_secdef('t', \$1, 'x', '$P'::jsonb)"
done
