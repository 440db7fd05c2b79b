#!/usr/bin/env node
// The `hintcheck` command of the npm package: runs the binary of the platform package npm
// installed beside it (@hintcheck/linux-x64 or @hintcheck/linux-arm64), with the same
// arguments, standard streams and exit status (a signal that ends it ends this process too).
"use strict";

const { spawnSync } = require("child_process");
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

const result = spawnSync(binary(), process.argv.slice(2), { stdio: "inherit" });
if (result.error) {
  console.error(`hintcheck: cannot run ${binary()}: ${result.error.message}`);
  process.exit(2);
}
if (result.signal) {
  process.kill(process.pid, result.signal);
}
process.exit(result.status === null ? 1 : result.status);
