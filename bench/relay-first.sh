#!/usr/bin/env bash
# relay-first.sh RELAY_COMMAND... — runs a relay whose process and
# PostgreSQL sessions the CPU scheduler serves first (SCHED_FIFO, priority
# 10), for bench/steady-control.sh: what the relay's latency is when it
# never waits in the run queue behind the producers.  Not a way to deploy
# it: it needs root (CAP_SYS_NICE), and PostgreSQL sessions are the
# server's processes.
#
# The relay starts under chrt; every 0.2 s its sessions (application_name
# "pgoutbox relay HOST-PID", PID the relay's) that are not yet SCHED_FIFO
# are moved, so sessions opened again after a reconnect are too.
# pgoutbox-bench's --relay-cmd starts it (with DATABASE_URL set) and stops
# it with SIGTERM; it stops the relay the same way and exits 0.
set -u
case ${1:-} in '' | -h | --help)
	sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'
	[ -n "${1:-}" ] && exit 0
	exit 2
	;;
esac
: "${DATABASE_URL:?relay-first.sh: DATABASE_URL is not set}"
if ! chrt -f 10 true 2>/dev/null; then
	echo "relay-first.sh: cannot set SCHED_FIFO here (chrt -f needs root or CAP_SYS_NICE)" >&2
	exit 2
fi
chrt -f 10 "$@" &
relay=$!
trap 'kill -TERM $relay 2>/dev/null; wait $relay; exit 0' TERM INT
while kill -0 $relay 2>/dev/null; do
	for pid in $(psql -XAtq -d "$DATABASE_URL" -c "SELECT pid FROM pg_stat_activity WHERE application_name LIKE 'pgoutbox relay %-$relay'" 2>/dev/null); do
		case $(chrt -p "$pid" 2>/dev/null) in
		*SCHED_FIFO*) ;;
		*) chrt -f -p 10 "$pid" >/dev/null 2>&1 ;;
		esac
	done
	sleep 0.2
done
wait $relay
echo "relay-first.sh: the relay ended on its own" >&2
exit 1
