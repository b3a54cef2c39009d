#!/usr/bin/env bash
# scripts/debian-package.sh SUITE PACKAGE DEST
#   Downloads PACKAGE's .deb from SUITE (e.g. trixie) of the Debian mirror
#   this machine's apt sources already name, and unpacks it into DEST
#   (dpkg-deb -x; DEST/usr/bin/... and so on). Nothing is installed.
#
#   The mirror is read at run time from /etc/apt/sources.list.d/*.sources
#   (deb822) and /etc/apt/sources.list (one-line form): the URI of the entry
#   for this release's own suite (VERSION_CODENAME in /etc/os-release), with
#   its signed-by keyring (default: debian-archive-keyring, which carries
#   the keys of the next release too). apt runs on a private state in a
#   temporary directory: the machine's sources, lists, caches, preferences
#   and update hooks are neither used nor touched. Every apt-get call ends
#   within DEBIAN_PACKAGE_TIMEOUT seconds (default 600).
#
#   The Makefile uses it for restic 0.18, the second restic the end-to-end
#   tests run: Debian 13's build needs only libc, so it runs on Debian 12.
set -euo pipefail

die() { echo "debian-package.sh: $*" >&2; exit 1; }

[ $# -eq 3 ] || die "usage: scripts/debian-package.sh SUITE PACKAGE DEST"
suite=$1 package=$2 dest=$3
timeout_s=${DEBIAN_PACKAGE_TIMEOUT:-600}
DEFAULT_KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg

# "URI KEYRING" of every enabled `deb` entry whose suites include $1, in the
# order apt reads them; KEYRING is "-" when the entry names none (or embeds
# a key block, which is not copied).
deb_entries() {
    local codename=$1 file
    for file in /etc/apt/sources.list.d/*.sources; do
        [ -f "$file" ] || continue
        awk -v want="$codename" '
            function flush() {
                if (types ~ /(^| )deb( |$)/ && enabled != "no" && (" " suites " ") ~ (" " want " ") && uri != "")
                    print uri, (key ~ /^\// ? key : "-")
                types = ""; suites = ""; uri = ""; key = ""; enabled = ""
            }
            /^[ \t]*#/ { next }
            /^[ \t]*$/ { flush(); next }
            /^[ \t]/ { next }
            {
                field = tolower($1); sub(/:$/, "", field)
                value = $0; sub(/^[^:]*:[ \t]*/, "", value)
                if (field == "types") types = value
                else if (field == "suites") suites = value
                else if (field == "uris") { split(value, u, /[ \t]+/); uri = u[1] }
                else if (field == "signed-by") key = value
                else if (field == "enabled") enabled = tolower(value)
            }
            END { flush() }
        ' "$file"
    done
    for file in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$file" ] || continue
        awk -v want="$codename" '
            $1 != "deb" { next }
            {
                key = "-"; i = 2
                if ($2 ~ /^\[/) {
                    while (i <= NF) {
                        opt = $i; gsub(/[\[\]]/, "", opt)
                        if (opt ~ /^signed-by=/) { sub(/^signed-by=/, "", opt); key = opt }
                        if ($i ~ /\]$/) { i++; break }
                        i++
                    }
                }
                if ($(i + 1) == want) print $i, key
            }
        ' "$file"
    done
}

codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
[ -n "$codename" ] || die "/etc/os-release names no VERSION_CODENAME"
read -r uri keyring < <(deb_entries "$codename" | head -n 1) || true
[ -n "${uri:-}" ] || die "no 'deb' entry for suite $codename in this machine's apt sources"
[ "$keyring" != "-" ] || keyring=$DEFAULT_KEYRING
[ -r "$keyring" ] || die "keyring $keyring is not readable"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# apt (as root) fetches as user _apt: it must reach the private lists.
chmod 0755 "$work"
mkdir -p "$work/sources" "$work/preferences" "$work/state/lists/partial" \
    "$work/cache/archives/partial" "$work/log" "$work/debs"
if [ "$(id -u)" = 0 ] && id _apt >/dev/null 2>&1; then
    chown _apt "$work/state/lists/partial" "$work/cache/archives/partial" "$work/debs"
fi
cat >"$work/sources/$suite.sources" <<EOF
Types: deb
URIs: $uri
Suites: $suite
Components: main
Signed-By: $keyring
EOF
# Read after the machine's apt.conf.d (whose proxy settings still apply).
cat >"$work/apt.conf" <<EOF
Dir::Etc::SourceList "/dev/null";
Dir::Etc::SourceParts "$work/sources";
Dir::Etc::Preferences "/dev/null";
Dir::Etc::PreferencesParts "$work/preferences";
Dir::State "$work/state";
Dir::State::Lists "$work/state/lists";
Dir::State::status "/dev/null";
Dir::Cache "$work/cache";
Dir::Log "$work/log";
Acquire::Languages "none";
Acquire::http::Timeout "60";
Acquire::https::Timeout "60";
#clear APT::Update::Pre-Invoke;
#clear APT::Update::Post-Invoke;
#clear APT::Update::Post-Invoke-Success;
#clear Acquire::IndexTargets::deb::DEP-11;
#clear Acquire::IndexTargets::deb::DEP-11-icons;
#clear Acquire::IndexTargets::deb::DEP-11-icons-small;
#clear Acquire::IndexTargets::deb::DEP-11-icons-large;
#clear Acquire::IndexTargets::deb::DEP-11-icons-hidpi;
#clear Acquire::IndexTargets::deb::DEP-11-icons-large-hidpi;
EOF
apt_get() { timeout "$timeout_s" apt-get -c "$work/apt.conf" -qq "$@"; }

echo "downloading $package from $suite of $uri"
apt_get update >"$work/update.log" 2>&1 \
    || { cat "$work/update.log" >&2; die "apt-get update of $suite failed or took over ${timeout_s}s"; }
(cd "$work/debs" && apt_get download "$package") \
    || die "apt-get download $package ($suite) failed or took over ${timeout_s}s"
debs=("$work"/debs/*.deb)
[ ${#debs[@]} -eq 1 ] && [ -f "${debs[0]}" ] || die "apt-get download left no single .deb"
mkdir -p "$dest"
dpkg-deb -x "${debs[0]}" "$dest"
echo "unpacked $(basename "${debs[0]}") into $dest"
