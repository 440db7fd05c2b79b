#!/usr/bin/env bash
# Installs hintcheck for the GitHub Action from the action's own source (cargo is on GitHub's
# runners), unless a hintcheck of the same version is already on PATH.
set -euo pipefail
src="${GITHUB_ACTION_PATH:?}"
want="$(sed -n 's/^version = "\(.*\)"/\1/p' "$src/Cargo.toml" | head -n1)"
if command -v hintcheck >/dev/null 2>&1; then
    have="$(hintcheck --version | awk '{print $2}')"
    if [ "$have" = "$want" ]; then
        echo "hintcheck $have is already installed"
        exit 0
    fi
fi
root="${RUNNER_TOOL_CACHE:-$HOME/.local}/hintcheck-$want"
cargo install --locked --quiet --path "$src" --bin hintcheck --root "$root"
echo "$root/bin" >>"${GITHUB_PATH:?}"
echo "installed hintcheck $want into $root/bin"
