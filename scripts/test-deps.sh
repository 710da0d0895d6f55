#!/usr/bin/env bash
# Installs the real servers the tests run against, when they are missing:
#   adb         Debian package adb
#   PostgreSQL  Debian package postgresql (initdb, pg_ctl)
#   gcc, g++    Debian package g++ (cgo: the race detector, and DuckDB's C++
#               library in testkit/duckread, linked with libstdc++)
#   MinIO       go install of the pinned server build
#   dbus-daemon Debian package dbus-daemon (the sleep tests' private bus)
#   Chromium    Debian package chromium (the dashboard's browser tests)
#   CJK fonts   Debian packages fonts-noto-cjk and fontconfig (fc-list)
#               (Japanese text in those tests)
#   nginx       Debian package nginx (the dashboard behind a reverse proxy)
# Safe to run again: whatever is found is left alone. Works as root, or
# through sudo when it exists.
#
# Usage: scripts/test-deps.sh [system] [minio]
#   system  everything installed with apt-get (all but MinIO)
#   minio   the MinIO server only
# Without an argument it does both. `make test` (scripts/test.sh) runs the
# minio part in the background while the system part and the checks run.
set -euo pipefail

WANT_SYSTEM=0
WANT_MINIO=0
[ "$#" -gt 0 ] || set -- system minio
for part in "$@"; do
	case "$part" in
	system) WANT_SYSTEM=1 ;;
	minio) WANT_MINIO=1 ;;
	*)
		echo "usage: scripts/test-deps.sh [system] [minio]" >&2
		exit 2
		;;
	esac
done

MINIO_MODULE="github.com/minio/minio@v0.0.0-20260212201848-7aac2a2c5b7c"

die() {
	echo "test-deps: $*" >&2
	exit 1
}

# summary prints the first two non-empty lines of a command's output, joined,
# without failing the script when the command does.
summary() {
	local out
	out="$("$@" 2>&1 || true)"
	printf '%s' "$out" | awk 'NF && n < 2 { printf "%s%s", (n ? ", " : ""), $0; n++ }'
}

SUDO=()
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then
	SUDO=(sudo)
fi

APT_UPDATED=0
apt_install() {
	local what="$1"
	shift
	command -v apt-get >/dev/null 2>&1 ||
		die "$what is missing and apt-get is not available; install the package(s) $* by hand"
	if [ "$(id -u)" -ne 0 ] && [ "${#SUDO[@]}" -eq 0 ]; then
		die "$what is missing; installing it needs root or sudo (apt-get install $*)"
	fi
	if [ "$APT_UPDATED" -eq 0 ]; then
		echo "apt-get update"
		"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq ||
			die "apt-get update failed"
		APT_UPDATED=1
	fi
	"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" ||
		die "apt-get install $* failed"
}

# install_system installs what comes from Debian packages.
install_system() {
	# --- adb -------------------------------------------------------------------
	adb_path() { command -v adb 2>/dev/null || true; }
	if [ -n "$(adb_path)" ]; then
		echo "adb: found $(adb_path) ($(summary adb version))"
	else
		echo "adb: installing via apt-get"
		apt_install adb adb
		[ -n "$(adb_path)" ] || die "adb: still not on PATH after apt-get install adb"
		echo "adb: installed $(adb_path) ($(summary adb version))"
	fi

	# --- PostgreSQL ------------------------------------------------------------
	initdb_path() {
		local p
		if p="$(command -v initdb 2>/dev/null)"; then
			echo "$p"
			return
		fi
		for p in /usr/lib/postgresql/*/bin/initdb; do
			if [ -x "$p" ]; then
				echo "$p"
				return
			fi
		done
	}
	if [ -n "$(initdb_path)" ]; then
		echo "postgresql: found $(initdb_path) ($(summary "$(initdb_path)" --version))"
	else
		echo "postgresql: installing via apt-get"
		apt_install postgresql postgresql
		[ -n "$(initdb_path)" ] || die "postgresql: initdb not found after apt-get install postgresql"
		echo "postgresql: installed $(initdb_path) ($(summary "$(initdb_path)" --version))"
	fi

	# --- C and C++ compilers for cgo --------------------------------------------
	if command -v gcc >/dev/null 2>&1 && command -v g++ >/dev/null 2>&1; then
		echo "gcc, g++: found ($(summary g++ --version))"
	else
		echo "gcc, g++: installing via apt-get"
		apt_install g++ g++
		command -v g++ >/dev/null 2>&1 || die "g++: still not on PATH after apt-get install g++"
		echo "gcc, g++: installed ($(summary g++ --version))"
	fi

	# --- Wine (the Windows build's test) and systemd tools ---------------------
	wine_path() { command -v wine64 || command -v wine || { [ -x /usr/lib/wine/wine64 ] && echo /usr/lib/wine/wine64; } || true; } 2>/dev/null
	if [ -n "$(wine_path)" ] && command -v x86_64-w64-mingw32-gcc >/dev/null 2>&1; then
		echo "wine: found $(wine_path) ($(summary "$(wine_path)" --version))"
	else
		echo "wine: installing via apt-get (about 40 s)"
		apt_install wine64 wine64 gcc-mingw-w64-x86-64
		[ -n "$(wine_path)" ] || die "wine: wine64 not found after apt-get install"
	fi
	if command -v systemd-analyze >/dev/null 2>&1; then
		echo "systemd-analyze: found $(command -v systemd-analyze)"
	else
		echo "systemd-analyze: installing via apt-get (package systemd)"
		apt_install systemd systemd
	fi

	# --- dbus-daemon (the fake systemd-logind of the sleep tests) --------------
	if command -v dbus-daemon >/dev/null 2>&1; then
		echo "dbus-daemon: found $(command -v dbus-daemon) ($(summary dbus-daemon --version))"
	else
		echo "dbus-daemon: installing via apt-get (package dbus-daemon)"
		apt_install dbus-daemon dbus-daemon
		command -v dbus-daemon >/dev/null 2>&1 || die "dbus-daemon: not on PATH after apt-get install dbus-daemon"
	fi

	# --- Python 3 (examples/python/ai_loop.py is run by a test) ----------------
	if command -v python3 >/dev/null 2>&1; then
		echo "python3: found $(command -v python3) ($(summary python3 --version))"
	else
		echo "python3: installing via apt-get (package python3)"
		apt_install python3 python3
		command -v python3 >/dev/null 2>&1 || die "python3: not on PATH after apt-get install python3"
	fi

	# --- Chromium (the dashboard's browser tests, testkit/browsertest) ---------
	# $EDGE_CHROMIUM, when set, names the browser the tests use instead.
	chromium_path() { command -v "${EDGE_CHROMIUM:-chromium}" || command -v chromium-browser || true; } 2>/dev/null
	# Debian's chromium wrapper script may complain on stderr; the version is on stdout.
	chromium_version() { "$(chromium_path)" --version 2>/dev/null | head -n 1 || true; }
	if [ -n "$(chromium_path)" ]; then
		echo "chromium: found $(chromium_path) ($(chromium_version))"
	else
		echo "chromium: installing via apt-get (package chromium)"
		apt_install chromium chromium
		[ -n "$(chromium_path)" ] || die "chromium: not on PATH after apt-get install chromium"
		echo "chromium: installed $(chromium_path) ($(chromium_version))"
	fi

	# --- Japanese fonts (the dashboard shows what phones displayed) ----------
	# Without a font with Japanese glyphs Chromium draws boxes, and the
	# observations test, which checks that the text renders, fails.
	ja_fonts() { fc-list :lang=ja family 2>/dev/null | head -n 1 || true; }
	if [ -n "$(ja_fonts)" ]; then
		echo "Japanese fonts: found ($(ja_fonts))"
	else
		echo "Japanese fonts: installing via apt-get (packages fontconfig, fonts-noto-cjk)"
		apt_install "Japanese fonts" fontconfig fonts-noto-cjk
		[ -n "$(ja_fonts)" ] || die "Japanese fonts: fc-list finds none after apt-get install fonts-noto-cjk"
		echo "Japanese fonts: installed ($(ja_fonts))"
	fi

	# --- nginx (the dashboard behind the reverse proxy of docs/api.md) -------
	# Debian installs it in /usr/sbin, which a user's PATH may lack.
	nginx_path() { command -v nginx || { [ -x /usr/sbin/nginx ] && echo /usr/sbin/nginx; } || true; } 2>/dev/null
	if [ -n "$(nginx_path)" ]; then
		echo "nginx: found $(nginx_path) ($(summary "$(nginx_path)" -v))"
	else
		echo "nginx: installing via apt-get (package nginx)"
		apt_install nginx nginx
		[ -n "$(nginx_path)" ] || die "nginx: not found after apt-get install nginx"
		echo "nginx: installed $(nginx_path) ($(summary "$(nginx_path)" -v))"
	fi
}

# install_minio installs the MinIO server with go install.
install_minio() {
	# --- MinIO -----------------------------------------------------------------
	command -v go >/dev/null 2>&1 || die "go is not on PATH; it is needed to find or install minio"
	GOBIN_DIR="$(go env GOBIN)"
	GOPATH_BIN="$(go env GOPATH | cut -d: -f1)/bin"
	minio_path() {
		local p
		if p="$(command -v minio 2>/dev/null)"; then
			echo "$p"
			return
		fi
		for p in ${GOBIN_DIR:+"$GOBIN_DIR/minio"} "$GOPATH_BIN/minio"; do
			if [ -x "$p" ]; then
				echo "$p"
				return
			fi
		done
	}
	if [ -n "$(minio_path)" ]; then
		echo "minio: found $(minio_path) ($(summary "$(minio_path)" --version | cut -d, -f1))"
	else
		# Without the symbol table and DWARF (-s -w) the link takes a third
		# less time and the binary is a quarter smaller; the tests need
		# neither. Without cgo, as MinIO's own releases are built: the
		# standard library's compilation is then the one the tests' builds
		# of the project's commands use (testkit/gobuild), not one more.
		echo "minio: installing via CGO_ENABLED=0 go install -ldflags='-s -w' $MINIO_MODULE (a few minutes the first time)"
		CGO_ENABLED=0 go install -ldflags='-s -w' "$MINIO_MODULE" || die "minio: go install $MINIO_MODULE failed"
		[ -n "$(minio_path)" ] || die "minio: not found in ${GOBIN_DIR:-$GOPATH_BIN} after go install"
		echo "minio: installed $(minio_path)"
	fi
}

[ "$WANT_SYSTEM" -eq 0 ] || install_system
[ "$WANT_MINIO" -eq 0 ] || install_minio
