#!/usr/bin/env bash
# Runs hintcheck for the GitHub Action. Only the inputs the user set become flags: the
# project's config file (.config/hintcheck.toml or hintcheck.toml) decides the rest, and the
# action's own defaults (a SARIF file to upload, a JUnit file, annotations) apply only where
# neither does. The exit code is saved as a step output instead of failing here, so that the
# SARIF upload still runs; so are the counts (contradicted, unexercised, tools) and the paths
# of the reports, read from the JSON report hintcheck writes beside them.
#
# With HINTCHECK_SCAN (a list of scenario files or directories), it scans them instead:
# JSON Lines results, a merged Markdown summary, the same counts.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="${HINTCHECK_BIN:-hintcheck}"
out="${GITHUB_OUTPUT:-/dev/null}"
tmp="${RUNNER_TEMP:-${TMPDIR:-/tmp}}"
json="$(mktemp "$tmp/hintcheck-report.XXXXXX")"
trap 'rm -f "$json"' EXIT

# A step output (`key=value`), also shown in the log.
output() {
    echo "$1=$2" >>"$out"
    echo "hintcheck: output $1=$2"
}

# Counts from a JSON report (verify) or a merged scan summary.
counts() {
    python3 - "$1" <<'PY'
import json, sys
data = json.load(open(sys.argv[1], encoding="utf-8"))
if "servers" in data:
    summaries = [s.get("summary") or {} for s in data["servers"]]
else:
    summaries = [data.get("summary") or {}]
for key in ("contradicted", "unexercised", "tools"):
    print(f"{key}={sum(int(s.get(key, 0) or 0) for s in summaries)}")
for key in ("sarif", "junit"):
    path = (data.get("outputs") or {}).get(key)
    if path:
        print(f"{key}-file={path}")
PY
}

if [ -n "${HINTCHECK_SCAN:-}" ]; then
    read -r -a targets <<<"$(printf '%s' "$HINTCHECK_SCAN" | tr '\n' ' ')"
    results="${HINTCHECK_RESULTS:-hintcheck-scan.jsonl}"
    flags=(--output "$results")
    if [ -n "${HINTCHECK_JOBS:-}" ]; then flags+=(--jobs "$HINTCHECK_JOBS"); fi
    if [ -n "${HINTCHECK_FAIL_ON:-}" ]; then flags+=(--fail-on "$HINTCHECK_FAIL_ON"); fi
    if [ -n "${HINTCHECK_SANDBOX:-}" ]; then flags+=(--sandbox "$HINTCHECK_SANDBOX"); fi
    "$bin" scan "${flags[@]}" "${targets[@]}"
    code=$?
    output exit-code "$code"
    if [ -s "$results" ]; then
        output results-file "$results"
        if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
            "$bin" merge --format markdown "$results" >>"$GITHUB_STEP_SUMMARY" || true
        fi
        if "$bin" merge --format json --output "$json" "$results" >/dev/null; [ -s "$json" ]; then
            while IFS= read -r line; do output "${line%%=*}" "${line#*=}"; done < <(counts "$json")
        fi
    fi
    exit 0
fi

# The args input is one string, split like a shell would (quotes allowed), never evaluated.
args=()
if [ -n "${HINTCHECK_ARGS:-}" ]; then
    while IFS= read -r -d '' a; do
        args+=("$a")
    done < <(python3 -c 'import shlex, sys; sys.stdout.write("".join(a + "\0" for a in shlex.split(sys.argv[1])))' "$HINTCHECK_ARGS")
fi

# What the config file decides about the reports.
decided="$(python3 "$here/config-report.py" "${HINTCHECK_CONFIG_FILE:-}")"
config_sets() { printf '%s\n' "$decided" | grep -q "^$1="; }

flags=(--json "$json")
if [ -n "${HINTCHECK_CONFIG_FILE:-}" ]; then flags+=(--config "$HINTCHECK_CONFIG_FILE"); fi
if [ -n "${HINTCHECK_FAIL_ON:-}" ]; then flags+=(--fail-on "$HINTCHECK_FAIL_ON"); fi
if [ -n "${HINTCHECK_BASELINE:-}" ]; then flags+=(--baseline "$HINTCHECK_BASELINE"); fi
if [ -n "${HINTCHECK_SANDBOX:-}" ]; then flags+=(--sandbox "$HINTCHECK_SANDBOX"); fi
# A SARIF file to upload and a JUnit file to hand on, unless the config file names its own.
if [ -n "${HINTCHECK_SARIF:-}" ]; then
    flags+=(--sarif "$HINTCHECK_SARIF")
elif ! config_sets report.sarif; then
    flags+=(--sarif hintcheck.sarif)
fi
if [ -n "${HINTCHECK_JUNIT:-}" ]; then
    flags+=(--junit "$HINTCHECK_JUNIT")
elif ! config_sets report.junit; then
    flags+=(--junit hintcheck.junit.xml)
fi
# Annotations: the input when set, else the config file, else on.
case "${HINTCHECK_ANNOTATIONS:-}" in
    true) flags+=(--annotations) ;;
    false) ;;
    *) if ! config_sets report.annotations; then flags+=(--annotations); fi ;;
esac

# hintcheck's own flags go before the user's arguments, which may end with `-- CMD…`.
"$bin" verify "${flags[@]}" "${args[@]}"
code=$?
output exit-code "$code"
if [ -s "$json" ]; then
    while IFS= read -r line; do
        key="${line%%=*}"
        value="${line#*=}"
        # Only reports that exist are handed on.
        case "$key" in
            *-file) if [ -s "$value" ]; then output "$key" "$value"; fi ;;
            *) output "$key" "$value" ;;
        esac
    done < <(counts "$json")
fi
exit 0
