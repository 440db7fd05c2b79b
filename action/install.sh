#!/usr/bin/env bash
# Installs hintcheck for the GitHub Action, the version of this action's Cargo.toml:
#   1. a hintcheck of that version on PATH or in the tool cache (restored by actions/cache) is
#      used as it is;
#   2. else the release's static binary for this machine, checked against its SHA-256 (the one
#      in action/checksums.txt when the action pins it, else the release's SHA256SUMS);
#   3. else (no release, no checksum, a mismatch, HINTCHECK_INSTALL=build) it is built from
#      this action's source with cargo (GitHub's runners have it), cargo's downloads cached.
set -euo pipefail
src="${GITHUB_ACTION_PATH:?}"
mode="${HINTCHECK_INSTALL:-auto}"
want="$(sed -n 's/^version = "\(.*\)"/\1/p' "$src/Cargo.toml" | head -n1)"
root="${RUNNER_TOOL_CACHE:-$HOME/.local}/hintcheck-$want"
path_file="${GITHUB_PATH:-/dev/null}"

version_of() { "$1" --version 2>/dev/null | awk '{print $2}'; }

if [ "$mode" != build ]; then
    if command -v hintcheck >/dev/null 2>&1 && [ "$(version_of hintcheck)" = "$want" ]; then
        echo "hintcheck $want is already installed"
        exit 0
    fi
    if [ -x "$root/bin/hintcheck" ] && [ "$(version_of "$root/bin/hintcheck")" = "$want" ]; then
        echo "$root/bin" >>"$path_file"
        echo "hintcheck $want restored from the cache into $root/bin"
        exit 0
    fi
fi

# The release binary, when there is one for this machine and its checksum is known.
download() {
    local arch asset repo base tmp sum
    case "$(uname -m)" in
        x86_64 | amd64) arch=x86_64 ;;
        aarch64 | arm64) arch=aarch64 ;;
        *) return 1 ;;
    esac
    asset="hintcheck-$want-$arch-linux.tar.gz"
    repo="${HINTCHECK_ACTION_REPOSITORY:-}"
    [ -n "$repo" ] || return 1
    base="${HINTCHECK_RELEASE_BASE:-https://github.com/$repo/releases/download}/v$want"
    tmp="$(mktemp -d)"
    sum=""
    if [ -f "$src/action/checksums.txt" ]; then
        sum="$(awk -v a="$asset" '$2 == a || $2 == "*" a {print $1}' "$src/action/checksums.txt")"
    fi
    if [ -z "$sum" ]; then
        curl -fsSL --retry 3 -o "$tmp/SHA256SUMS" "$base/SHA256SUMS" || return 1
        sum="$(awk -v a="$asset" '$2 == a || $2 == "*" a {print $1}' "$tmp/SHA256SUMS")"
    fi
    [ -n "$sum" ] || return 1
    curl -fsSL --retry 3 -o "$tmp/$asset" "$base/$asset" || return 1
    if ! echo "$sum  $tmp/$asset" | sha256sum -c --quiet -; then
        echo "::warning title=hintcheck::$asset does not match its checksum; building from source instead"
        return 1
    fi
    mkdir -p "$root/bin"
    tar -xzf "$tmp/$asset" -C "$root/bin" hintcheck
    rm -rf "$tmp"
    echo "installed the release binary $asset (sha256 $sum) into $root/bin"
}

if [ "$mode" = build ] || ! download; then
    echo "building hintcheck $want from the action's source"
    "${CARGO:-cargo}" install --locked --quiet --force --path "$src" --bin hintcheck --root "$root"
    echo "built hintcheck $want into $root/bin"
fi
echo "$root/bin" >>"$path_file"
