#!/usr/bin/env bash
# Builds hintcheck's packages for Python and Node users into OUT (default packaging/dist):
#   OUT/pypi/hintcheck-VERSION-py3-none-PLATFORM.whl  a `bin` wheel (maturin): pipx/uvx hintcheck
#   OUT/npm/hintcheck-linux-ARCH-VERSION.tgz          @hintcheck/linux-x64, @hintcheck/linux-arm64:
#                                                     the binary, for one platform each
#   OUT/npm/hintcheck-VERSION.tgz                     hintcheck: `npx hintcheck`, which runs the
#                                                     binary of the platform package installed
#
#   packaging/build.sh [--profile release|dev] [--out DIR] [--no-wheel] [--no-npm]
#                      [--binary PATH --arch x86_64|aarch64]...
#
# The wheel is built by maturin (MATURIN, default `maturin` on PATH) for this machine, with
# MATURIN_ARGS added (the release adds its target and `--compatibility manylinux_2_17 --zig`).
# The npm platform packages take the binaries given with --binary/--arch (the release's static
# builds), else the one the wheel was built from. Publishing is a maintainer's step
# (docs/releasing.md).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
profile=release
out="$root/packaging/dist"
wheel=1
npm=1
binaries=()
arches=()
while [ $# -gt 0 ]; do
  case "$1" in
    --profile) profile="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --no-wheel) wheel=0; shift ;;
    --no-npm) npm=0; shift ;;
    --binary) binaries+=("$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"); shift 2 ;;
    --arch) arches+=("$2"); shift 2 ;;
    *) echo "build.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
if [ "${#binaries[@]}" -ne "${#arches[@]}" ]; then
  echo "build.sh: give each --binary its --arch" >&2
  exit 2
fi
version="$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -n1)"
mkdir -p "$out/pypi" "$out/npm"
# The steps below run in other directories.
out="$(cd "$out" && pwd)"

if [ "$wheel" -eq 1 ]; then
  echo "== the wheel (maturin, profile $profile)"
  # shellcheck disable=SC2086
  (cd "$root/packaging/pypi" && "${MATURIN:-maturin}" build --profile "$profile" \
    --out "$out/pypi" ${MATURIN_ARGS:-})
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
if [ "$npm" -eq 0 ]; then
  ls -l "$out"/pypi/*.whl
  exit 0
fi
if [ "${#binaries[@]}" -eq 0 ]; then
  # The binary the wheel carries (stripped by maturin): both packages run the same one.
  wheel_file="$(ls -t "$out"/pypi/hintcheck-"$version"-*.whl 2>/dev/null | head -n1 || true)"
  if [ -z "$wheel_file" ]; then
    echo "build.sh: no wheel to take the binary from: give --binary PATH --arch ARCH" >&2
    exit 2
  fi
  python3 - "$wheel_file" "$work/hintcheck-bin" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel:
    name = next(n for n in wheel.namelist() if n.endswith(".data/scripts/hintcheck"))
    with wheel.open(name) as src, open(sys.argv[2], "wb") as dst:
        shutil.copyfileobj(src, dst)
PY
  binaries+=("$work/hintcheck-bin")
  arches+=("$(uname -m)")
fi

echo "== the npm packages"
platform_names=()
for i in "${!binaries[@]}"; do
  case "${arches[$i]}" in
    x86_64 | x64) npm_arch=x64 ;;
    aarch64 | arm64) npm_arch=arm64 ;;
    *) echo "build.sh: no npm package for ${arches[$i]}" >&2; exit 2 ;;
  esac
  pkg="$work/linux-$npm_arch"
  mkdir -p "$pkg/bin"
  sed -e "s/@ARCH@/$npm_arch/g" -e "s/\"version\": \"0.0.0\"/\"version\": \"$version\"/" \
    "$root/packaging/npm/platform/package.json" > "$pkg/package.json"
  install -m 755 "${binaries[$i]}" "$pkg/bin/hintcheck"
  (cd "$pkg" && npm pack --silent --pack-destination "$out/npm" >/dev/null)
  platform_names+=("@hintcheck/linux-$npm_arch")
done
main="$work/hintcheck"
mkdir -p "$main/bin"
cp "$root/packaging/npm/hintcheck/README.md" "$main/"
install -m 755 "$root/packaging/npm/hintcheck/bin/hintcheck.js" "$main/bin/hintcheck.js"
VERSION="$version" node -e '
  const fs = require("fs");
  const p = JSON.parse(fs.readFileSync(process.argv[1], "utf8"));
  p.version = process.env.VERSION;
  for (const name of Object.keys(p.optionalDependencies)) p.optionalDependencies[name] = p.version;
  fs.writeFileSync(process.argv[2], JSON.stringify(p, null, 2) + "\n");
' "$root/packaging/npm/hintcheck/package.json" "$main/package.json"
(cd "$main" && npm pack --silent --pack-destination "$out/npm" >/dev/null)
ls -l "$out"/pypi/*.whl "$out"/npm/*.tgz 2>/dev/null || ls -l "$out"/npm/*.tgz
