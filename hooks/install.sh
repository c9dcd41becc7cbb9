#!/bin/sh
# Install HAMi-core (libvgpu.so) and ld.so.preload into $HOOK_PATH on the host.
#
# Run by the DaemonSet's postStart hook in the plugin container, where $HOOK_PATH is a
# hostPath mounted at the same path (docs/hami-core.md §1, docs/configuration.md §6).
#
#   install.sh [SOURCE_DIR [HOOK_PATH]]
#
# SOURCE_DIR (default $VGPU_HOOK_SOURCE, else /k8s-vgpu/lib/nvidia) must hold libvgpu.so;
# ld.so.preload is taken from SOURCE_DIR if present, else from this script's directory, else
# written with its fixed content.  Each file is copied to a temporary name in HOOK_PATH and
# renamed over the target, so a container starting meanwhile sees either the old or the new
# file, never a partial one.  Identical targets are left alone (idempotent).
# It also makes $HOOK_PATH/containers (every container's cache directory lives there) root's
# alone, mode 0700, as the plugin and the monitor create it (docs/hami-core.md §2.3): no host user
# reaches another container's files, and each container reaches its own through its bind mount.
# Exit status: 0 on success, 1 on any error (with a message naming the path).
set -eu

PRELOAD_CONTENT=/usr/local/vgpu/libvgpu.so
SRC=${1:-${VGPU_HOOK_SOURCE:-/k8s-vgpu/lib/nvidia}}
DEST=${2:-${HOOK_PATH:-/usr/local/vgpu}}
SELF_DIR=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
TMP=
GEN=

die() {
    echo "vgpu-install: error: $*" >&2
    exit 1
}

cleanup() {
    if [ -n "$TMP" ] && [ -e "$TMP" ]; then rm -f -- "$TMP"; fi
    if [ -n "$GEN" ]; then rm -f -- "$GEN"; fi
}
trap cleanup EXIT
trap 'exit 1' HUP INT TERM

same_content() { # FILE1 FILE2
    [ -f "$2" ] && [ ! -L "$2" ] || return 1
    if command -v cmp >/dev/null 2>&1; then
        cmp -s -- "$1" "$2"
    else
        return 1 # cannot compare: copy again (still atomic, same result)
    fi
}

install_file() { # SOURCE TARGET MODE
    src=$1 target=$2 mode=$3
    [ -f "$src" ] || die "source $src is missing or not a regular file"
    [ -r "$src" ] || die "source $src is not readable"
    if [ -d "$target" ]; then # a directory, or a symlink to one (mv would move INTO it)
        die "target $target is a directory"
    fi
    if same_content "$src" "$target"; then
        chmod "$mode" -- "$target" || die "cannot chmod $target"
        echo "vgpu-install: $target is up to date"
        return 0
    fi
    TMP=$(mktemp "$DEST/.$(basename -- "$target").XXXXXX") || die "cannot create a temporary file in $DEST"
    cp -- "$src" "$TMP" || die "cannot copy $src to $TMP"
    chmod "$mode" -- "$TMP" || die "cannot chmod $TMP"
    mv -f -- "$TMP" "$target" || die "cannot rename $TMP to $target"
    TMP=
    echo "vgpu-install: installed $target"
}

[ -d "$SRC" ] || die "source directory $SRC does not exist"
[ -f "$SRC/libvgpu.so" ] || die "source $SRC/libvgpu.so is missing or not a regular file"
mkdir -p -- "$DEST" || die "cannot create $DEST"
[ -d "$DEST" ] || die "$DEST is not a directory"

CONTAINERS=$DEST/containers
if [ -L "$CONTAINERS" ]; then die "$CONTAINERS is a symbolic link; refusing to use it"; fi
mkdir -p -- "$CONTAINERS" || die "cannot create $CONTAINERS"
[ -d "$CONTAINERS" ] || die "$CONTAINERS is not a directory"
chmod 0700 -- "$CONTAINERS" || die "cannot chmod $CONTAINERS"

install_file "$SRC/libvgpu.so" "$DEST/libvgpu.so" 0755

if [ -f "$SRC/ld.so.preload" ]; then
    PRELOAD_SRC=$SRC/ld.so.preload
elif [ -f "$SELF_DIR/ld.so.preload" ]; then
    PRELOAD_SRC=$SELF_DIR/ld.so.preload
else
    GEN=$(mktemp) || die "cannot create a temporary file"
    printf '%s' "$PRELOAD_CONTENT" > "$GEN" || die "cannot write $GEN"
    PRELOAD_SRC=$GEN
fi
install_file "$PRELOAD_SRC" "$DEST/ld.so.preload" 0644
