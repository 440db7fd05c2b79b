#!/usr/bin/env bash
# Runs `hintcheck verify` for the GitHub Action: SARIF to a file, the Markdown summary to the
# step summary (hintcheck writes it when GITHUB_STEP_SUMMARY is set), and the exit code saved
# as a step output instead of failing here, so that the SARIF upload still runs.
set -uo pipefail
bin="${HINTCHECK_BIN:-hintcheck}"
sarif="${HINTCHECK_SARIF:-hintcheck.sarif}"
out="${GITHUB_OUTPUT:-/dev/null}"

# The args input is one string, split like a shell would (quotes allowed), never evaluated.
args=()
if [ -n "${HINTCHECK_ARGS:-}" ]; then
    while IFS= read -r -d '' a; do
        args+=("$a")
    done < <(python3 -c 'import shlex, sys; sys.stdout.write("".join(a + "\0" for a in shlex.split(sys.argv[1])))' "$HINTCHECK_ARGS")
fi

flags=(--sarif "$sarif" --fail-on "${HINTCHECK_FAIL_ON:-error}")
if [ -n "${HINTCHECK_CONFIG_FILE:-}" ]; then flags+=(--config "$HINTCHECK_CONFIG_FILE"); fi
if [ -n "${HINTCHECK_BASELINE:-}" ]; then flags+=(--baseline "$HINTCHECK_BASELINE"); fi
if [ "${HINTCHECK_SANDBOX:-required}" = "best-effort" ]; then flags+=(--sandbox best-effort); fi
if [ "${HINTCHECK_ANNOTATIONS:-true}" = "true" ]; then flags+=(--annotations); fi

# hintcheck's own flags go before the user's arguments, which may end with `-- CMD…`.
"$bin" verify "${flags[@]}" "${args[@]}"
code=$?
echo "exit-code=$code" >>"$out"
if [ -s "$sarif" ]; then
    echo "sarif-file=$sarif" >>"$out"
fi
exit 0
