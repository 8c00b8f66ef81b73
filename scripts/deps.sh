#!/usr/bin/env bash
# Installs the Debian packages pgoutbox needs to build, test and demo,
# skipping those already installed.  Uses sudo when not root.
set -euo pipefail

packages=(gcc clang make meson ninja-build pkg-config python3 libpq-dev
	libjansson-dev libcmocka-dev postgresql postgresql-client postgresql-15-auto-failover
	procps iproute2 libhiredis-dev redis-server redis-tools libmsgpack-dev libssl-dev
	libnats-dev nats-server librabbitmq-dev rabbitmq-server librdkafka-dev kcat libcurl4-openssl-dev openssl pgbouncer
	libmicrohttpd-dev libsystemd-dev prometheus chromium
	man-db groff-base zsh debhelper dpkg-dev fakeroot lintian
	python3-psycopg libpostgresql-jdbc-java default-jdk-headless
	golang-go golang-github-jackc-pgx-v4-dev)
if [ "${PGO_DEPS_EXTRA:-}" ]; then
	read -r -a extra <<<"$PGO_DEPS_EXTRA"
	packages+=("${extra[@]}")
fi

missing=()
for p in "${packages[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed'; then
		missing+=("$p")
	fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "deps: installing ${missing[*]}" >&2
sudo=()
if [ "$(id -u)" != 0 ]; then
	command -v sudo >/dev/null || { echo "deps: need root or sudo to install ${missing[*]}" >&2; exit 1; }
	sudo=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -q >&2
# Services of the packages (rabbitmq-server, redis-server) must not start:
# the tests run servers of their own.  policy-rc.d says no to every start
# while installing (Debian's invoke-rc.d convention).
policy=/usr/sbin/policy-rc.d
own_policy=
if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
	"${sudo[@]}" chmod +x "$policy"
	own_policy=1
fi
rc=0
"${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" >&2 || rc=$?
[ -n "$own_policy" ] && "${sudo[@]}" rm -f "$policy"
[ "$rc" = 0 ] || exit "$rc"
# A system rabbitmq-server started anyway: stop it; the tests never use it.
if command -v rabbitmqctl >/dev/null && pgrep -u rabbitmq beam >/dev/null 2>&1; then
	"${sudo[@]}" service rabbitmq-server stop >&2 2>/dev/null || true
fi
# The Debian package may start a cluster of its own; we never use it.
