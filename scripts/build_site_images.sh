#!/usr/bin/env bash
# Build the container images the tests of the site copies run (tests/containers/), with Debian's podman:
# nothing can be pulled, so everything is made here.
#   localhost/webarena-live-test/base:bookworm          Debian bookworm with python3 (mmdebstrap, podman import)
#   docker.io/am1n3e/webarena-verified-shopping:latest   the test image (tests/containers/image/) under the
#   docker.io/am1n3e/webarena-verified-reddit:latest     official names of two sites (the same program)
#   localhost/webarena-live-test/slow-site:latest        the same with SITE_START_DELAY=20: a slow start like Magento's
#
#   scripts/build_site_images.sh                          into podman's default storage
#   scripts/build_site_images.sh --root DIR --runroot DIR into another storage as well (images copied from
#                                                         the default one with podman save | podman load)
# (or WEBARENA_LIVE_TEST_PODMAN_ROOT and WEBARENA_LIVE_TEST_PODMAN_RUNROOT). Idempotent and quick when the
# images are there: each carries the hash of the program's sources and this script (a label), and is
# rebuilt or copied again only when that changes. Needs root, podman, runc and mmdebstrap (bootstrap.sh
# installs them).
set -euo pipefail
cd "$(dirname "$0")/.."

root="${WEBARENA_LIVE_TEST_PODMAN_ROOT:-}"
runroot="${WEBARENA_LIVE_TEST_PODMAN_RUNROOT:-}"
while [ $# -gt 0 ]; do
    case "$1" in
        --root) root="$2"; shift 2 ;;
        --runroot) runroot="$2"; shift 2 ;;
        *) echo "usage: scripts/build_site_images.sh [--root DIR --runroot DIR]" >&2; exit 2 ;;
    esac
done
if { [ -n "$root" ] && [ -z "$runroot" ]; } || { [ -z "$root" ] && [ -n "$runroot" ]; }; then
    echo "--root and --runroot go together (a podman storage is both)" >&2
    exit 2
fi
for tool in podman runc mmdebstrap; do
    command -v "$tool" >/dev/null 2>&1 || { echo "$tool is missing: apt-get install podman runc mmdebstrap uidmap slirp4netns fuse-overlayfs" >&2; exit 1; }
done

image_dir=tests/containers/image
base=localhost/webarena-live-test/base:bookworm
site_images=(docker.io/am1n3e/webarena-verified-shopping:latest docker.io/am1n3e/webarena-verified-reddit:latest)
slow_image=localhost/webarena-live-test/slow-site:latest
slow_delay=20
source_hash="$(cat "$0" "$image_dir"/Containerfile "$image_dir"/*.py "$image_dir"/orders.json | sha256sum | cut -c1-16)"

# `has STORAGE_ARGS... -- IMAGE`: the image is in that storage and was built from these sources.
has() {
    local args=()
    while [ "$1" != -- ]; do args+=("$1"); shift; done
    [ "$(podman "${args[@]}" image inspect --format '{{index .Labels "webarena-live.test.source"}}' "$2" 2>/dev/null)" = "$source_hash" ]
}
all_present() {
    local image
    for image in "${site_images[@]}" "$slow_image"; do
        has "$@" -- "$image" || return 1
    done
}

work="$(mktemp -d "${TMPDIR:-/tmp}/webarena-live-images.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# One build at a time on this machine (test sessions may call this together).
exec 9>"${TMPDIR:-/tmp}/webarena-live-build-site-images.lock"
flock 9

if ! all_present; then
    if ! podman image exists "$base"; then
        echo "==> the base image $base: Debian bookworm with python3 (mmdebstrap)"
        # The essential variant (no apt) without documentation, manual pages and translations: the image
        # only runs python3.
        mmdebstrap --quiet --variant=essential --include=python3-minimal,python3 \
            --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
            --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
            bookworm "$work/rootfs.tar"
        podman import --quiet --change 'CMD ["/usr/bin/python3"]' "$work/rootfs.tar" "$base" >/dev/null
        rm -f "$work/rootfs.tar"
    fi
    # The images these builds replace, removed after (only those: the default storage is not only ours).
    mapfile -t replaced < <(podman image inspect --format '{{.Id}}' "${site_images[@]}" "$slow_image" 2>/dev/null | sort -u)
    echo "==> the test site image (sources $source_hash) as ${site_images[*]}"
    podman build --quiet --runtime runc --build-arg "BASE=$base" --build-arg "SOURCE=$source_hash" \
        --tag "${site_images[0]}" "$image_dir" >/dev/null
    for image in "${site_images[@]:1}"; do
        podman tag "${site_images[0]}" "$image"
    done
    echo "==> $slow_image (SITE_START_DELAY=$slow_delay)"
    printf 'FROM %s\nENV SITE_START_DELAY=%s\n' "${site_images[0]}" "$slow_delay" >"$work/Containerfile.slow"
    podman build --quiet --runtime runc --file "$work/Containerfile.slow" --tag "$slow_image" "$work" >/dev/null
    for image in "${replaced[@]}"; do
        podman rmi "$image" >/dev/null 2>&1 || true  # still used by a container, or the same image: kept
    done
fi
all_present || { echo "the images were built but do not carry the sources' hash $source_hash" >&2; exit 1; }

if [ -n "$root" ]; then
    other=(--root "$root" --runroot "$runroot")
    if ! all_present "${other[@]}"; then
        echo "==> copying the images into the storage at $root"
        podman save --quiet --multi-image-archive --output "$work/images.tar" "${site_images[@]}" "$slow_image"
        podman "${other[@]}" load --quiet --input "$work/images.tar" >/dev/null
        podman "${other[@]}" image prune --force >/dev/null
        all_present "${other[@]}" || { echo "the images did not arrive in the storage at $root" >&2; exit 1; }
    fi
fi
echo "==> the site images are ready (sources $source_hash)"
