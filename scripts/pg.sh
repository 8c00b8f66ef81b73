# pg.sh — sourced helpers that run a throwaway PostgreSQL cluster in a
# directory: initdb -A trust --nosync, a free port, a unix socket in the
# directory, pg_ctl -w start.  PostgreSQL refuses to run as root, so as
# root the cluster runs as the postgres user.
#
#   pg_start DIR [extra postgres -c settings...]   sets PG_DIR, PG_PORT, PG_URL
#   pg_stop / pg_restart / pg_kill9
#   pg_url DBNAME                                   conninfo for a database
#
# A streaming standby of the cluster started last (issue 38's failover
# tests); its own variables, so that PG_* still name the primary:
#   pg_standby_start DIR [extra -c settings...]     pg_basebackup -R of the
#       primary into DIR, started on a free port; sets SB_DIR, SB_PORT
#   pg_promote                                      pg_ctl promote -w the standby
#   pg_kill9 [DIR]                                  kill -9 the postmaster of
#       DIR (default PG_DIR) and every process it started: a crashed host
#       (its postmaster.pid removed, so that pg_stop leaves it alone)
#   pg_stop_dir DIR                                 pg_ctl stop -m immediate

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

pg_standby_start() {
	local dir=$1; shift
	SB_DIR=$(mkdir -p "$dir" && cd "$dir" && pwd)
	SB_PORT=$(pg_free_port)
	[ "$(id -u)" = 0 ] && chown postgres: "$SB_DIR"
	# -R writes primary_conninfo and standby.signal; the socket directory
	# is the primary's (initdb's pg_hba.conf trusts local replication).
	pg_as "$PG_BIN/pg_basebackup" -D "$SB_DIR/data" -R -X stream -c fast \
		-h "$PG_DIR" -p "$PG_PORT" -U postgres >"$SB_DIR/basebackup.log" 2>&1 ||
		{ cat "$SB_DIR/basebackup.log" >&2; return 1; }
	SB_OPTS="-p $SB_PORT -k $SB_DIR -c listen_addresses=127.0.0.1 -c max_connections=200"
	for o in "$@"; do SB_OPTS="$SB_OPTS -c $o"; done
	pg_as "$PG_BIN/pg_ctl" -D "$SB_DIR/data" -l "$SB_DIR/server.log" -w -t 60 \
		-o "$SB_OPTS" start >/dev/null || { tail -n 20 "$SB_DIR/server.log" >&2; return 1; }
	export SB_DIR SB_PORT SB_OPTS
}

pg_promote() {
	pg_as "$PG_BIN/pg_ctl" -D "$SB_DIR/data" -w -t 60 promote >/dev/null
}

pg_kill9() {
	local dir=${1:-$PG_DIR} pm kids
	pm=$(head -n 1 "$dir/data/postmaster.pid" 2>/dev/null) || return 0
	kids=$(pgrep -P "$pm" || true)
	# shellcheck disable=SC2086
	kill -9 "$pm" $kids 2>/dev/null || true
	while kill -0 "$pm" 2>/dev/null; do sleep 0.05; done
	# Its pid may be reused: pg_stop must not signal that process.
	rm -f "$dir/data/postmaster.pid"
}

pg_stop_dir() {
	if [ -f "$1/data/postmaster.pid" ]; then
		pg_as "$PG_BIN/pg_ctl" -D "$1/data" -m immediate -w stop >/dev/null 2>&1 || true
	fi
}
