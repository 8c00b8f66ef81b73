# pgbouncer.sh — sourced helpers that run a throwaway pgbouncer in a
# directory in front of the test PostgreSQL (scripts/pg.sh), like
# tests/redis.sh does for Redis: a free port on 127.0.0.1, trust
# authentication, every database of the cluster (the "*" entry), the pool
# mode given, logs in the directory.  As root it runs as the postgres user
# (pgbouncer -u; it refuses to run as root).
#
#   pgbouncer_start DIR MODE [extra "key = value" settings...]
#                         MODE: session or transaction; sets BOUNCER_DIR,
#                         BOUNCER_PORT, BOUNCER_PID
#   pgbouncer_stop        SIGTERM (immediate shutdown), waits for the exit
#   bouncer_url DBNAME [USER]   conninfo for a database through it

pgbouncer_start() {
	local dir=$1 mode=$2; shift 2
	command -v pgbouncer >/dev/null || { echo "pgbouncer.sh: pgbouncer not found (apt-get install pgbouncer)" >&2; return 1; }
	BOUNCER_DIR=$(mkdir -p "$dir" && cd "$dir" && pwd)
	BOUNCER_PORT=$(pg_free_port)
	[ "$(id -u)" = 0 ] && chown postgres: "$BOUNCER_DIR"
	{
		echo '[databases]'
		echo "* = host=$PG_DIR port=$PG_PORT"
		echo '[pgbouncer]'
		echo "listen_addr = 127.0.0.1"
		echo "listen_port = $BOUNCER_PORT"
		echo "unix_socket_dir ="
		echo "auth_type = trust"
		echo "auth_file = $BOUNCER_DIR/users.txt"
		echo "pool_mode = $mode"
		echo "default_pool_size = 10"
		echo "max_client_conn = 200"
		echo "logfile = $BOUNCER_DIR/pgbouncer.log"
		echo "pidfile = $BOUNCER_DIR/pgbouncer.pid"
		local o
		for o in "$@"; do echo "$o"; done
	} >"$BOUNCER_DIR/pgbouncer.ini"
	echo '"postgres" ""' >"$BOUNCER_DIR/users.txt"
	[ "$(id -u)" = 0 ] && chown postgres: "$BOUNCER_DIR"/*
	local as_user=()
	[ "$(id -u)" = 0 ] && as_user=(-u postgres)
	pgbouncer "${as_user[@]}" "$BOUNCER_DIR/pgbouncer.ini" >"$BOUNCER_DIR/stdout.log" 2>&1 &
	BOUNCER_PID=$!
	export BOUNCER_DIR BOUNCER_PORT BOUNCER_PID
	local i
	for i in $(seq 200); do
		if psql -XAtq "$(bouncer_url postgres)" -c 'SELECT 1' >/dev/null 2>&1; then
			return 0
		fi
		kill -0 "$BOUNCER_PID" 2>/dev/null || break
		sleep 0.05
	done
	echo "pgbouncer.sh: pgbouncer did not start" >&2
	tail -n 20 "$BOUNCER_DIR/pgbouncer.log" "$BOUNCER_DIR/stdout.log" >&2 2>/dev/null
	return 1
}

pgbouncer_stop() {
	[ -n "${BOUNCER_PID:-}" ] || return 0
	kill -TERM "$BOUNCER_PID" 2>/dev/null || true
	wait "$BOUNCER_PID" 2>/dev/null || true
	BOUNCER_PID=
}

bouncer_url() { echo "host=127.0.0.1 port=$BOUNCER_PORT user=${2:-postgres} dbname=$1"; }
