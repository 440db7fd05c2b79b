#!/usr/bin/env node
// The `hintcheck` command of the npm package: runs the binary of the platform package npm
// installed beside it (@hintcheck/linux-x64 or @hintcheck/linux-arm64) with the same
// arguments and standard streams. Signals sent to this process (a CI timeout's SIGTERM, a
// SIGHUP) are passed on, Ctrl-C reaches both from the terminal, and this process waits for
// hintcheck (which writes its partial report when interrupted) and ends as it ended: with
// its exit status, or by the same signal.
"use strict";

const { spawn } = require("child_process");
const path = require("path");

const PLATFORMS = {
  "linux x64": "@hintcheck/linux-x64",
  "linux arm64": "@hintcheck/linux-arm64",
};

function binary() {
  const override = process.env.HINTCHECK_BINARY;
  if (override) {
    return override;
  }
  const key = `${process.platform} ${process.arch}`;
  const pkg = PLATFORMS[key];
  if (!pkg) {
    console.error(
      `hintcheck: no binary for ${key}: hintcheck runs on Linux (x86_64, aarch64), where its sandbox is`
    );
    process.exit(2);
  }
  try {
    return path.join(path.dirname(require.resolve(`${pkg}/package.json`)), "bin", "hintcheck");
  } catch (e) {
    console.error(
      `hintcheck: the package ${pkg} is not installed (npm skips optional dependencies with --no-optional or --omit=optional); install it, or set HINTCHECK_BINARY`
    );
    process.exit(2);
  }
}

const program = binary();
const child = spawn(program, process.argv.slice(2), { stdio: "inherit" });
// SIGINT comes from the terminal to the whole process group: hintcheck gets it too, and this
// process only waits. The others are sent to this process alone: pass them on.
const handlers = {
  SIGINT: () => {},
  SIGTERM: () => child.kill("SIGTERM"),
  SIGHUP: () => child.kill("SIGHUP"),
};
for (const [signal, handler] of Object.entries(handlers)) {
  process.on(signal, handler);
}
child.on("error", (error) => {
  console.error(`hintcheck: cannot run ${program}: ${error.message}`);
  process.exit(2);
});
child.on("exit", (code, signal) => {
  for (const [name, handler] of Object.entries(handlers)) {
    process.removeListener(name, handler);
  }
  if (signal) {
    process.kill(process.pid, signal);
    return;
  }
  process.exit(code === null ? 1 : code);
});
