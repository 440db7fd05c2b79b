#!/usr/bin/env bash
# Makes hintcheck's sandbox work on the runner: asks `hintcheck doctor`, applies the narrowest
# fix it recommends (on Ubuntu 24.04: an AppArmor profile that lets only the hintcheck binary
# create user namespaces), and asks again. With best-effort (HINTCHECK_SANDBOX, else the config
# file's [sandbox] level) a sandbox that still cannot be set up is reported, not fatal.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="${HINTCHECK_BIN:-hintcheck}"
level="${HINTCHECK_SANDBOX:-}"
if [ -z "$level" ]; then
    level="$(python3 "$here/config-report.py" "${HINTCHECK_CONFIG_FILE:-}" | sed -n 's/^sandbox\.level=//p')"
fi
level="${level:-required}"

doctor() { "$bin" doctor --format json || true; }
available() { python3 -c 'import json,sys; sys.exit(0 if json.load(sys.stdin)["required_sandbox_available"] else 1)'; }

report="$(doctor)"
if printf '%s' "$report" | available; then
    echo "hintcheck: the sandbox works on this runner"
    exit 0
fi
fixes="$(printf '%s' "$report" | python3 -c '
import json, sys
for c in json.load(sys.stdin)["checks"]:
    if c.get("fix"):
        print("# " + c["name"])
        print(c["fix"])
')"
if [ -n "$fixes" ]; then
    echo "hintcheck: applying what hintcheck doctor recommends:"
    printf '%s\n' "$fixes"
    bash -euo pipefail -c "$fixes"
    report="$(doctor)"
    if printf '%s' "$report" | available; then
        echo "hintcheck: the sandbox works now"
        exit 0
    fi
fi
"$bin" doctor || true
if [ "$level" = "best-effort" ]; then
    echo "::warning title=hintcheck::the sandbox cannot be fully set up on this runner; continuing with --sandbox best-effort"
    exit 0
fi
echo "::error title=hintcheck::the sandbox cannot be set up on this runner (see hintcheck doctor above); set the input sandbox: best-effort to continue without it"
exit 5
