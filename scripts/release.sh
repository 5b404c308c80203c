#!/usr/bin/env bash
# Release build (`make release`): a static timemachine binary for each
# platform, packed with README.md into
#   dist/timemachine-<version>-<os>-<arch>.tar.gz
# plus dist/SHA256SUMS over the archives; the unpacked binaries stay in
# dist/timemachine-<version>-<os>-<arch>/ for inspection.
#
# The build is reproducible: the same commit and Go toolchain give the same
# bytes on any machine (no cgo, -trimpath, no build id, no VCS stamp beyond
# the version, fixed GOAMD64/GOARM64 levels, archive entries sorted with the
# commit's time, owner 0 and gzip without a name or time).
#
# After building it checks what it built: `file` must call every binary
# statically linked (Linux) and of the right architecture, and the binary for
# this machine must print the version it was stamped with.
#
# Environment: VERSION (default: git describe --tags --always --dirty),
# PLATFORMS (default: the four below), DIST (default dist), GO (default go),
# SOURCE_DATE_EPOCH (default: the commit's time).
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
VERSION=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
PLATFORMS=${PLATFORMS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64}
DIST=${DIST:-dist}
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
LDFLAGS="-s -w -buildid= -X main.version=${VERSION}"

case "$VERSION" in
  *[!A-Za-z0-9._+-]*|"") echo "release: VERSION '$VERSION' is not usable in a file name" >&2; exit 2 ;;
esac
case "$VERSION" in
  *-dirty) echo "release: warning: the work tree has uncommitted changes; version $VERSION" >&2 ;;
esac

rm -rf "$DIST"
mkdir -p "$DIST"
host_os=$($GO env GOHOSTOS)
host_arch=$($GO env GOHOSTARCH)
archives=()
for p in $PLATFORMS; do
  os=${p%/*} arch=${p#*/}
  name="timemachine-${VERSION}-${os}-${arch}"
  dir="$DIST/$name"
  mkdir -p "$dir"
  echo "release: building $name" >&2
  CGO_ENABLED=0 GOOS=$os GOARCH=$arch GOAMD64=v1 GOARM64=v8.0 GOFLAGS= \
    $GO build -trimpath -buildvcs=false -ldflags "$LDFLAGS" -o "$dir/timemachine" ./cmd/timemachine
  cp README.md "$dir/"
  [ -f LICENSE ] && cp LICENSE "$dir/"
  chmod 0755 "$dir/timemachine"
  chmod 0644 "$dir"/*.md
  tar --sort=name --mtime="@${SOURCE_DATE_EPOCH}" --owner=0 --group=0 --numeric-owner \
    --mode='u+rwX,go+rX,go-w' --format=gnu -C "$DIST" -cf - "$name" | gzip -n -9 >"$dir.tar.gz"
  archives+=("$name.tar.gz")

  # Check the binary is what its name says.
  if command -v file >/dev/null 2>&1; then
    desc=$(file -b "$dir/timemachine")
    echo "release:   $desc" >&2
    case "$os/$arch" in
      linux/amd64) want='ELF 64-bit.*x86-64.*statically linked' ;;
      linux/arm64) want='ELF 64-bit.*ARM aarch64.*statically linked' ;;
      darwin/amd64) want='Mach-O 64-bit.*x86_64' ;;
      darwin/arm64) want='Mach-O 64-bit.*arm64' ;;
      *) want='' ;;
    esac
    if [ -n "$want" ] && ! grep -Eq "$want" <<<"$desc"; then
      echo "release: $name: file says '$desc', want /$want/" >&2
      exit 1
    fi
  else
    echo "release:   (file(1) not installed; skipped the format check)" >&2
  fi
  if [ "$os" = "$host_os" ] && [ "$arch" = "$host_arch" ]; then
    got=$("$dir/timemachine" --version)
    if [ "$got" != "timemachine $VERSION" ]; then
      echo "release: $name --version printed '$got', want 'timemachine $VERSION'" >&2
      exit 1
    fi
    echo "release:   --version: $got" >&2
  fi
done

(cd "$DIST" && sha256sum "${archives[@]}" >SHA256SUMS && sha256sum -c --quiet SHA256SUMS)
echo "release: $DIST/SHA256SUMS:" >&2
cat "$DIST/SHA256SUMS"
