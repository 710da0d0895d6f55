#!/usr/bin/env bash
# Builds the release files into dist/ (make dist):
#   edgeagent_<version>_<os>_<arch>.tar.gz (linux amd64, arm64) and .zip
#   (windows amd64): the binaries, units or install scripts, example
#   configs and docs
#   edgeagent_<version>_<arch>.deb and edgecoord_<version>_<arch>.deb
#   (amd64, arm64)
#   SHA256SUMS
#
#   packaging/dist.sh                          everything
#   packaging/dist.sh deb NAME ARCH BIN OUT    one .deb from the linux
#                                              binaries in BIN, into OUT
#
# Environment: VERSION (default v0.0.0-dev; a leading v is dropped in file
# names and packages), GO (go), NFPM (the nfpm command; default go run of
# the pinned nfpm module).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
GO="${GO:-go}"
NFPM_MODULE="github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.45.2"
VERSION="${VERSION:-v0.0.0-dev}"
VER="${VERSION#v}"
LINUX_ARCHES=(amd64 arm64)
COMMANDS=(edgeagent edgecoord edgelab)

die() {
	echo "dist: $*" >&2
	exit 1
}

nfpm() {
	if [ -n "${NFPM:-}" ]; then
		$NFPM "$@"
	else
		"$GO" run "$NFPM_MODULE" "$@"
	fi
}

# build GOOS GOARCH DIR: the commands, static, with the version stamped in.
build() {
	local goos="$1" goarch="$2" dir="$3" ext=""
	[ "$goos" = windows ] && ext=.exe
	mkdir -p "$dir"
	for cmd in "${COMMANDS[@]}"; do
		CGO_ENABLED=0 GOOS="$goos" GOARCH="$goarch" "$GO" build -trimpath \
			-ldflags "-s -w -X main.version=$VERSION" -o "$dir/$cmd$ext" "./cmd/$cmd" ||
			die "build $cmd for $goos/$goarch failed"
	done
}

# deb NAME ARCH BIN OUT
deb() {
	local name="$1" arch="$2" bin="$3" out="$4" config
	mkdir -p "$out"
	# nfpm expands ${ARCH} and ${VERSION} itself, but not ${BIN} in
	# contents.
	config="$(mktemp --suffix=.yaml)"
	sed "s|\${BIN}|$bin|g" "packaging/$name.yaml" >"$config"
	ARCH="$arch" VERSION="$VER" nfpm package --config "$config" \
		--packager deb --target "$out/${name}_${VER}_${arch}.deb" >/dev/null ||
		{ rm -f "$config"; die "nfpm: $name $arch failed"; }
	rm -f "$config"
	echo "$out/${name}_${VER}_${arch}.deb"
}

# common DIR: what every archive holds besides binaries.
common() {
	local dir="$1"
	mkdir -p "$dir/examples" "$dir/docs"
	cp README.md "$dir/"
	cp examples/agent.yaml examples/coordinator.yaml "$dir/examples/"
	cp docs/install.md docs/security.md docs/operations.md "$dir/docs/"
}

all() {
	local dist=dist work
	rm -rf "$dist"
	mkdir -p "$dist"
	work="$(mktemp -d)"
	trap "rm -rf '$work'" EXIT

	for arch in "${LINUX_ARCHES[@]}"; do
		local base="edgeagent_${VER}_linux_${arch}" dir
		dir="$work/$base"
		build linux "$arch" "$dir"
		common "$dir"
		mkdir -p "$dir/systemd"
		cp -r systemd/edgeagent.service systemd/edgecoord.service systemd/sysusers.d \
			systemd/tmpfiles.d systemd/udev "$dir/systemd/"
		tar -C "$work" -czf "$dist/$base.tar.gz" --owner=0 --group=0 "$base"
		echo "$dist/$base.tar.gz"
		for name in edgeagent edgecoord; do
			deb "$name" "$arch" "$dir" "$dist"
		done
	done

	local base="edgeagent_${VER}_windows_amd64" dir
	dir="$work/$base"
	build windows amd64 "$dir"
	common "$dir"
	cp windows/install.ps1 windows/uninstall.ps1 "$dir/"
	cp windows/README.md "$dir/README-windows.md"
	(cd "$work" && zip -qr "$OLDPWD/$dist/$base.zip" "$base") || die "zip failed"
	echo "$dist/$base.zip"

	(cd "$dist" && sha256sum -- *.tar.gz *.zip *.deb >SHA256SUMS)
	echo "$dist/SHA256SUMS"
}

case "${1:-all}" in
all) all ;;
deb)
	[ $# -eq 5 ] || die "usage: dist.sh deb NAME ARCH BIN OUT"
	deb "$2" "$3" "$4" "$5"
	;;
*) die "unknown command $1" ;;
esac
