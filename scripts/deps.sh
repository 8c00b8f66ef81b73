#!/usr/bin/env bash
# Installs the Debian packages pgoutbox needs to build, test and demo,
# skipping those already installed.  Uses sudo when not root.
set -euo pipefail

packages=(gcc make meson ninja-build pkg-config python3 libpq-dev
	libinih-dev libjansson-dev libcmocka-dev postgresql postgresql-client
	procps iproute2 libhiredis-dev redis-server redis-tools libmsgpack-dev libssl-dev
	libcurl4-openssl-dev openssl)
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
"${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
# The Debian package may start a cluster of its own; we never use it.
