#!/usr/bin/env bash
# lockwarden's OCI image, built without a container engine (umoci, skopeo).
#
#   scripts/image.sh build BINARY LAYOUT
#       Writes an OCI image layout to LAYOUT (replacing it), tagged with the
#       version BINARY reports. BINARY must be a static lockwarden (make image
#       builds one for x86_64-unknown-linux-musl). The image holds:
#         /usr/bin/lockwarden   BINARY, stripped
#         /usr/bin/restic       Debian's restic (for `lockwarden run`), with
#                               the two glibc files it loads
#         /usr/bin/kubectl      Debian's kubectl (for --hosts-command)
#         /etc/ssl/certs/ca-certificates.crt   Debian's CA bundle
#       and runs as user 65532 with entrypoint /usr/bin/lockwarden. Nothing in
#       it needs a writable root filesystem: the cache goes to /tmp/cache
#       (mount an emptyDir on /tmp), the state to a volume on /state.
#       Files are owned by root and dated at the commit, so the same
#       inputs give the same layer.
#
#   scripts/image.sh push LAYOUT IMAGE
#       Pushes LAYOUT's image to IMAGE (host/repository:tag) and prints
#       IMAGE@sha256:... on stdout. Credentials as skopeo finds them
#       (`skopeo login HOST`); IMAGE_TLS_VERIFY=false for a plain-HTTP
#       registry such as one on 127.0.0.1.
set -euo pipefail

die() { echo "image.sh: $*" >&2; exit 1; }

# The Debian packages whose files go into the image.
PACKAGES=(restic kubernetes-client libc6 ca-certificates)
# The user the image runs as (distroless's "nonroot" number).
USER_ID=65532

build() {
    local binary=$1 layout=$2
    [ -x "$binary" ] || die "$binary: no such executable"
    if readelf -l "$binary" | grep -q 'INTERP'; then
        die "$binary is dynamically linked; the image needs a static (musl) build"
    fi
    for tool in umoci apt-get dpkg-deb tar readelf; do
        command -v "$tool" >/dev/null || die "$tool is missing (make image installs umoci and skopeo)"
    done
    local first version commit epoch created
    first=$("$binary" --version | head -n 1)
    # "lockwarden 0.1.0 (commit 0123456789ab)"
    version=$(awk '{print $2}' <<<"$first")
    commit=$(sed -n 's/.*(commit \([0-9a-z]*\)).*/\1/p' <<<"$first")
    [ -n "$version" ] || die "cannot read the version from: $first"
    epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
    created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)

    # LAYOUT is replaced: only when it is absent or an OCI layout already.
    if [ -e "$layout" ] || [ -L "$layout" ]; then
        [ -d "$layout" ] && [ ! -L "$layout" ] && [ -f "$layout/oci-layout" ] \
            || die "$layout exists and is not an OCI layout; not replacing it"
        local entry
        for entry in "$layout"/* "$layout"/.[!.]*; do
            case "${entry##*/}" in
            oci-layout | index.json | blobs | '*' | '.[!.]*') ;;
            *) die "$layout holds $entry, which no OCI layout does; not replacing it" ;;
            esac
        done
    fi
    local work
    work=$(mktemp -d)
    trap "rm -rf '$work'" EXIT
    mkdir -p "$work/debs" "$work/files" "$work/rootfs"
    (cd "$work/debs" && timeout 600 apt-get download -qq "${PACKAGES[@]}" 2>/dev/null) \
        || die "apt-get download ${PACKAGES[*]} failed or took over 10 minutes (run apt-get update?)"
    local deb
    for deb in "$work"/debs/*.deb; do
        dpkg-deb --extract "$deb" "$work/files"
        dpkg-deb --show --showformat='${Package} ${Version}\n' "$deb" >>"$work/packages"
    done

    local root=$work/rootfs files=$work/files
    mkdir -p "$root/usr/bin" "$root/etc/ssl/certs" "$root/tmp" "$root/state" \
        "$root/home/lockwarden" "$root/usr/share/doc/lockwarden-image"
    chmod 1777 "$root/tmp"
    # Stripped: the symbols are for debugging, not for the image.
    install -s -m 0755 "$binary" "$root/usr/bin/lockwarden"
    install -m 0755 "$files/usr/bin/restic" "$files/usr/bin/kubectl" "$root/usr/bin/"
    # restic is linked against glibc: its loader and libc.so.6, where the
    # package puts them (and /lib64's link to the loader).
    local lib loader
    lib=$(dirname "$(find "$files" -name libc.so.6 | head -n 1)")
    loader=$(find "$files" -path '*/lib64/ld-linux-x86-64.so.2' | head -n 1)
    [ -n "$lib" ] && [ -n "$loader" ] || die "libc6 has no libc.so.6 or loader"
    lib=${lib#"$files"}
    mkdir -p "$root$lib" "$root/lib64"
    cp -L "$files$lib/libc.so.6" "$files$lib/ld-linux-x86-64.so.2" "$root$lib/"
    ln -s "$lib/ld-linux-x86-64.so.2" "$root/lib64/ld-linux-x86-64.so.2"
    cat "$files"/usr/share/ca-certificates/mozilla/*.crt >"$root/etc/ssl/certs/ca-certificates.crt"
    printf 'root:x:0:0:root:/root:/usr/sbin/nologin\nlockwarden:x:%s:%s:lockwarden:/home/lockwarden:/usr/sbin/nologin\n' \
        "$USER_ID" "$USER_ID" >"$root/etc/passwd"
    printf 'root:x:0:\nlockwarden:x:%s:\n' "$USER_ID" >"$root/etc/group"
    # What came from Debian, and its licences.
    sort "$work/packages" >"$root/usr/share/doc/lockwarden-image/packages"
    for package in "${PACKAGES[@]}"; do
        mkdir -p "$root/usr/share/doc/$package"
        cp "$files/usr/share/doc/$package/copyright" "$root/usr/share/doc/$package/"
    done
    chmod -R go-w,a+rX "$root"
    chmod 1777 "$root/tmp"

    tar --create --file "$work/layer.tar" --directory "$root" --sort=name \
        --owner=0 --group=0 --numeric-owner --mtime="@$epoch" --format=posix \
        --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime .

    rm -rf "$layout"
    umoci init --layout "$layout"
    umoci new --image "$layout:$version"
    umoci raw add-layer --image "$layout:$version" --history.created "$created" \
        --history.created_by "scripts/image.sh build" "$work/layer.tar"
    local config=(
        --no-history --created "$created" --author lockwarden
        --architecture amd64 --os linux
        --config.user "$USER_ID:$USER_ID"
        --config.entrypoint /usr/bin/lockwarden --config.cmd --help
        --config.workingdir /
        --config.env PATH=/usr/bin
        --config.env HOME=/home/lockwarden
        --config.env XDG_CACHE_HOME=/tmp/cache
        --config.env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
        --config.volume /tmp --config.volume /state
        --config.label org.opencontainers.image.title=lockwarden
        --config.label org.opencontainers.image.version="$version"
        --config.label org.opencontainers.image.revision="$commit"
        --config.label org.opencontainers.image.licenses=Apache-2.0
    )
    umoci config --image "$layout:$version" "${config[@]}"
    umoci gc --layout "$layout"
    echo "wrote $layout ($version): $(du -sh "$layout" | cut -f1)" >&2
}

push() {
    local layout=$1 image=$2
    command -v skopeo >/dev/null || die "skopeo is missing (make image installs it)"
    # host[:port]/path/name:tag, the tag after the last slash.
    [[ $image =~ ^[a-z0-9.-]+(:[0-9]+)?(/[a-z0-9._-]+)+:[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$ ]] \
        || die "IMAGE must be host[:port]/repository:tag, not $image"
    local verify=${IMAGE_TLS_VERIFY:-true}
    case "$verify:${image%%/*}" in
    true:*) ;;
    false:localhost | false:localhost:* | false:127.* | false:\[::1\]*) ;;
    false:*) die "IMAGE_TLS_VERIFY=false is only for registries on this machine, not ${image%%/*}" ;;
    *) die "IMAGE_TLS_VERIFY must be true or false" ;;
    esac
    local tag
    tag=$(umoci ls --layout "$layout" | head -n 1)
    [ -n "$tag" ] || die "$layout holds no image (run make image)"
    local digestfile
    digestfile=$(mktemp)
    trap "rm -f '$digestfile'" EXIT
    skopeo --command-timeout 10m copy --quiet --dest-tls-verify="$verify" \
        --digestfile "$digestfile" "oci:$layout:$tag" "docker://$image" >&2
    echo "${image%:*}@$(cat "$digestfile")"
}

case "${1:-}" in
build) [ $# = 3 ] || die "usage: $0 build BINARY LAYOUT"; build "$2" "$3" ;;
push) [ $# = 3 ] || die "usage: $0 push LAYOUT IMAGE"; push "$2" "$3" ;;
*) die "usage: $0 build BINARY LAYOUT | push LAYOUT IMAGE" ;;
esac
