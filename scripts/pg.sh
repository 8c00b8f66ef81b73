# pg.sh — sourced helpers that run a throwaway PostgreSQL cluster in a
# directory: initdb -A trust --nosync, a free port, a unix socket in the
# directory, pg_ctl -w start.  PostgreSQL refuses to run as root, so as
# root the cluster runs as the postgres user.
#
#   pg_start DIR [extra postgres -c settings...]   sets PG_DIR, PG_PORT, PG_URL
#   pg_stop / pg_restart / pg_kill9
#   pg_url DBNAME                                   conninfo for a database

pg_bindir() {
	local d
	if command -v initdb >/dev/null 2>&1; then
		dirname "$(readlink -f "$(command -v initdb)")"
		return
	fi
	d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
	[ -n "$d" ] || { echo "pg.sh: PostgreSQL server binaries not found (apt-get install postgresql)" >&2; return 1; }
	echo "$d"
}

pg_as() {
	if [ "$(id -u)" = 0 ]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

pg_free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

pg_start() {
	local dir=$1; shift
	local bin; bin=$(pg_bindir) || return 1
	PG_BIN=$bin
	PG_DIR=$(mkdir -p "$dir" && cd "$dir" && pwd)
	PG_PORT=${PG_PORT:-$(pg_free_port)}
	[ "$(id -u)" = 0 ] && chown postgres: "$PG_DIR"
	if [ ! -f "$PG_DIR/data/PG_VERSION" ]; then
		pg_as "$bin/initdb" -D "$PG_DIR/data" -A trust -U postgres --nosync \
			-E UTF8 --locale=C >"$PG_DIR/initdb.log" 2>&1 ||
			{ cat "$PG_DIR/initdb.log" >&2; return 1; }
	fi
	PG_OPTS="-p $PG_PORT -k $PG_DIR -c listen_addresses=127.0.0.1 -c max_connections=200"
	for o in "$@"; do PG_OPTS="$PG_OPTS -c $o"; done
	pg_as "$bin/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" -w -t 60 \
		-o "$PG_OPTS" start >/dev/null || { tail -n 20 "$PG_DIR/server.log" >&2; return 1; }
	PG_URL="host=$PG_DIR port=$PG_PORT user=postgres dbname=postgres"
	export PG_BIN PG_DIR PG_PORT PG_URL PG_OPTS
}

pg_url() { echo "host=$PG_DIR port=$PG_PORT user=postgres dbname=$1"; }

pg_stop() {
	[ -n "${PG_DIR:-}" ] && [ -f "$PG_DIR/data/postmaster.pid" ] &&
		pg_as "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m fast -w stop >/dev/null 2>&1
	return 0
}

pg_start_again() {
	pg_as "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" -w -t 60 \
		-o "$PG_OPTS" start >/dev/null
}

pg_restart() { pg_stop; pg_start_again; }
