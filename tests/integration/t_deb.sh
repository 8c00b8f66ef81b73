# The Debian packages (issue 43): `make deb` builds pgoutbox, libpgoutbox0
# and libpgoutbox-dev from the tree and lintian reports no error; they
# install on this machine; the installed /usr/bin/pgoutbox migrates a
# fresh database and relays events; examples/c_api.c builds against the
# installed -dev package with pkg-config and runs; the purge leaves
# nothing behind.  The system is restored on any failure (the EXIT trap).
. "$(dirname "$0")/../lib.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
pkgs=(pgoutbox libpgoutbox0 libpgoutbox-dev)
sudo=()
[ "$(id -u)" = 0 ] || sudo=(sudo -n)
apt=("${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -q -y -o DPkg::Lock::Timeout=300)

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | qgrep 'ok installed'; }
for p in "${pkgs[@]}"; do
	installed "$p" && fail "$p is installed on this machine already; t_deb installs and purges its own (dpkg --purge ${pkgs[*]} first)"
done
for c in dpkg-buildpackage dh lintian fakeroot; do
	command -v "$c" >/dev/null || fail "$c missing: scripts/deps.sh installs it"
done

# Build: a copy of the tree, DEB_BUILD_OPTIONS=nocheck (this suite is the
# check), then lintian.
t0=$(date +%s)
make -C "$root" --no-print-directory deb "DEB_BUILD=$T_TMP/deb" >"$T_TMP/make.log" 2>&1 ||
	fail "make deb: $(tail -30 "$T_TMP/make.log")"
note "make deb: $(($(date +%s) - t0)) s"
debs=()
for p in "${pkgs[@]}"; do
	f=$(ls "$T_TMP"/deb/"${p}"_*.deb 2>/dev/null | head -1)
	[ -n "$f" ] || fail "no ${p}_*.deb: $(ls "$T_TMP/deb")"
	debs+=("$f")
done
grep -E '^E: ' "$T_TMP/make.log" && fail "lintian errors"
dpkg-deb -c "${debs[0]}" >"$T_TMP/contents"
grep -q '/usr/bin/pgoutbox$' "$T_TMP/contents" || fail "pgoutbox.deb has no /usr/bin/pgoutbox"

# Install with apt only what needs no other package (nothing else of the
# system changes), and purge it whatever happens next.
"${apt[@]}" -s install --no-install-recommends "${debs[@]}" >"$T_TMP/sim" 2>&1 || fail "apt-get -s install: $(tail -5 "$T_TMP/sim")"
extra=$(grep '^Inst ' "$T_TMP/sim" | awk '{print $2}' | grep -vxF -e pgoutbox -e libpgoutbox0 -e libpgoutbox-dev || true)
[ -z "$extra" ] || fail "installing the packages would also install: $extra"
purge() {
	cleanup_pids
	local p any=
	for p in "${pkgs[@]}"; do
		installed "$p" || dpkg-query -W -f='${Status}' "$p" 2>/dev/null | qgrep 'config-files' && any=1
	done
	[ -z "$any" ] || "${apt[@]}" purge "${pkgs[@]}" >"$T_TMP/purge.log" 2>&1 || true
}
trap purge EXIT
"${apt[@]}" install --no-install-recommends "${debs[@]}" >"$T_TMP/install.log" 2>&1 || fail "apt-get install: $(tail -10 "$T_TMP/install.log")"
for p in "${pkgs[@]}"; do installed "$p" || fail "$p not installed"; done

bin=/usr/bin/pgoutbox
[ "$(command -v pgoutbox)" = "$bin" ] || fail "pgoutbox on PATH is $(command -v pgoutbox), not $bin"
"$bin" --version | qgrep "^pgoutbox $("$PGO_BIN" --version | awk '{print $2}') " || fail "--version: $("$bin" --version)"
for page in pgoutbox pgoutbox-relay pgoutbox-queue; do
	man -w "$page" >/dev/null 2>&1 || fail "man $page: not installed"
done
man -w 5 pgoutbox.ini >/dev/null 2>&1 || fail "man 5 pgoutbox.ini: not installed"
[ -s /usr/share/bash-completion/completions/pgoutbox ] || fail "no bash completion"
[ -s /usr/share/zsh/vendor-completions/_pgoutbox ] || fail "no zsh completion"
[ -s /lib/systemd/system/pgoutbox@.service ] || fail "no systemd unit"
grep -q "^ExecStart=$bin run " /lib/systemd/system/pgoutbox@.service || fail "the unit does not run $bin"
"$bin" config check --config /etc/pgoutbox/pgoutbox.ini >/dev/null || fail "the default configuration does not check"

# The installed binary against a fresh database: migrate, a relay, events.
name=t_deb
PGOPTIONS='-c client_min_messages=warning' psql -XAtq "$(pg_url postgres)" -c "DROP DATABASE IF EXISTS $name" -c "CREATE DATABASE $name" >/dev/null
export DATABASE_URL
DATABASE_URL=$(pg_url "$name")
"$bin" migrate >"$T_TMP/migrate.log" 2>&1 || fail "migrate: $(cat "$T_TMP/migrate.log")"
[ "$(q 'SELECT max(version) FROM pgoutbox.migrations')" = "$("$bin" --version | sed 's/.*schema version \([0-9]*\).*/\1/')" ] ||
	fail "schema version $(q 'SELECT max(version) FROM pgoutbox.migrations')"
PGOUTBOX_RELAY_STATS_INTERVAL=0 "$bin" relay --sink stdout >"$T_TMP/relayed" 2>"$T_TMP/relay.log" &
R=$!
PIDS+=("$R")
for i in 1 2 3; do
	q "SELECT pgoutbox.send('orders', '$i', 'order.created', '{\"n\": $i}')" >/dev/null
done
"$bin" send --topic orders --key 4 --type order.created '{"n": 4}' >/dev/null || fail "pgoutbox send"
wait_until 20 '[ "$(wc -l <"$T_TMP/relayed")" -ge 4 ]'
stop_relay "$R"
[ "$(wc -l <"$T_TMP/relayed")" = 4 ] || fail "relayed $(wc -l <"$T_TMP/relayed") events, want 4"
grep -q '"key":"4","type":"order.created","payload":{"n": 4}' "$T_TMP/relayed" || fail "event 4: $(tail -1 "$T_TMP/relayed")"
[ "$(pending)" = 0 ] || fail "pending $(pending) after the relay"

# examples/c_api.c against the installed -dev package, through pkg-config.
pkg-config --exists pgoutbox || fail "pkg-config does not find pgoutbox"
[ "$(pkg-config --modversion pgoutbox)" = "$("$PGO_BIN" --version | awk '{print $2}')" ] || fail "pkg-config version $(pkg-config --modversion pgoutbox)"
# shellcheck disable=SC2046
cc -o "$T_TMP/c_api" "$root/examples/c_api.c" $(pkg-config --cflags --libs pgoutbox) 2>"$T_TMP/cc.log" ||
	fail "cc examples/c_api.c: $(cat "$T_TMP/cc.log")"
ldd "$T_TMP/c_api" | qgrep -E 'libpgoutbox.so.0 => (/usr)?/lib/' || fail "c_api does not use the installed library: $(ldd "$T_TMP/c_api" | grep pgoutbox)"
"$T_TMP/c_api" produce 10 >"$T_TMP/produce" 2>&1 || fail "c_api produce: $(cat "$T_TMP/produce")"
[ "$(pending)" = 11 ] || fail "c_api produced $(pending) events, want 11"

# Purge: nothing of the packages is left.
files=$(for p in "${pkgs[@]}"; do dpkg -L "$p"; done | sort -u)
"${apt[@]}" purge "${pkgs[@]}" >"$T_TMP/purge.log" 2>&1 || fail "apt-get purge: $(tail -5 "$T_TMP/purge.log")"
for p in "${pkgs[@]}"; do
	st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	case $st in "" | *not-installed) ;; *) fail "$p after purge: $st" ;; esac
	[ -z "$(dpkg -L "$p" 2>/dev/null)" ] || fail "dpkg -L $p lists files after purge"
done
left=
nfiles=0
while read -r f; do
	[ -n "$f" ] || continue
	[ ! -d "$f" ] || continue # directories, and /lib (usrmerge: -> usr/lib)
	nfiles=$((nfiles + 1))
	[ ! -e "$f" ] && [ ! -L "$f" ] || left="$left $f"
done <<<"$files"
[ -z "$left" ] || fail "left after purge:$left"
[ ! -e /etc/pgoutbox ] || fail "/etc/pgoutbox left after purge"
[ "$nfiles" -ge 20 ] || fail "only $nfiles files were checked"
command -v pgoutbox >/dev/null && [ "$(command -v pgoutbox)" = "$bin" ] && fail "$bin left"
note "built, installed, ran, purged: $nfiles files gone"
