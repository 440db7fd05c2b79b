#!/usr/bin/env python3
"""Prints what the project's hintcheck config file decides about the reports, one `key=value`
line each (`report.sarif=…`, `report.junit=…`, `report.annotations=…`,
`sandbox.level=…`), so that the GitHub
Action passes only what neither the user's inputs nor that file decide. The file is found as
hintcheck finds it: the path given, else HINTCHECK_CONFIG, else .config/hintcheck.toml or
hintcheck.toml from the working directory up to the repository's root. Paths are printed as
hintcheck resolves them (relative to the file's directory, or to the directory above
`.config/`)."""

import os
import sys
from pathlib import Path

CANDIDATES = (".config/hintcheck.toml", "hintcheck.toml")
KEYS = (("report", "sarif"), ("report", "junit"), ("report", "annotations"), ("sandbox", "level"))
# Values that are paths, printed resolved.
PATHS = {("report", "sarif"), ("report", "junit")}


def discover(explicit):
    if explicit:
        return Path(explicit)
    if os.environ.get("HINTCHECK_CONFIG"):
        return Path(os.environ["HINTCHECK_CONFIG"])
    d = Path.cwd()
    while True:
        for c in CANDIDATES:
            if (d / c).is_file():
                return d / c
        if (d / ".git").exists() or d.parent == d:
            return None
        d = d.parent


def parse_simple(text):
    """Tables and `key = "string"` / `key = true|false` lines: enough for [report] on a
    Python without tomllib (before 3.11)."""
    data, table = {}, {}
    data[""] = table
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip() if '"' not in raw else raw.strip()
        if line.startswith("[") and line.endswith("]"):
            table = data.setdefault(line.strip("[] "), {})
        elif "=" in line:
            key, value = (p.strip() for p in line.split("=", 1))
            if value.startswith('"'):
                table[key] = value[1:].split('"', 1)[0]
            elif value in ("true", "false"):
                table[key] = value == "true"
    return data


def load(path):
    text = path.read_text(encoding="utf-8")
    try:
        import tomllib
    except ModuleNotFoundError:
        return parse_simple(text)
    return tomllib.loads(text)


def main():
    path = discover(sys.argv[1] if len(sys.argv) > 1 else "")
    if path is None or not path.is_file():
        return 0
    try:
        data = load(path)
    except Exception as e:  # hintcheck itself reports a broken file with its line.
        print(f"config-error={e}", file=sys.stderr)
        return 0
    folder = path.resolve().parent
    base = folder.parent if folder.name == ".config" else folder
    for table, key in KEYS:
        value = data.get(table, {}).get(key)
        if value is None:
            continue
        if isinstance(value, bool):
            print(f"{table}.{key}={'true' if value else 'false'}")
        elif (table, key) in PATHS:
            print(f"{table}.{key}={base / value}")
        else:
            print(f"{table}.{key}={value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
