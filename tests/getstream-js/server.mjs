// A real `tidings serve` with getstream's v2 protocol on: its own process on a
// free loopback port, SQLite in a temporary directory, one Stream api key.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { eventually, freePort } from "../../clients/js/test/server.mjs";

// The Makefile names the venv's; else whichever `tidings` is on PATH.
const BIN = process.env.TIDINGS_BIN || "tidings";

export const KEY = "tidings-app";
export const SECRET = "s3cret-".repeat(6);
export const GROUPS = ["user", "timeline", "timeline_aggregated"];

// {url, stop()} once /healthz answers.
export async function startServer() {
  const dir = mkdtempSync(join(tmpdir(), "tidings-getstream-js-"));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const argv = ["--database-url", `sqlite:///${join(dir, "x.db")}`, "serve", "--port", String(port)];
  const env = {
    ...process.env,
    TIDINGS_SECRET: randomBytes(24).toString("hex"),
    TIDINGS_STREAM_KEYS: JSON.stringify([{ key: KEY, secret: SECRET, groups: GROUPS }]),
    PYTHONUNBUFFERED: "1",
  };
  const proc = spawn(BIN, argv, { env, stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  proc.stderr.on("data", (chunk) => (stderr += chunk));
  const exited = new Promise((resolve) => proc.once("exit", (code, signal) => resolve({ code, signal })));
  proc.once("error", (error) => (stderr += `could not start ${BIN} (set TIDINGS_BIN): ${error.message}`));
  const healthy = async () => {
    if (proc.exitCode !== null) throw new Error(`${BIN} exited ${proc.exitCode}:\n${stderr}`);
    return fetch(`${url}/healthz`).then((r) => r.status === 200, () => false);
  };
  try {
    await eventually(healthy, 30_000, `${BIN} to answer`);
  } catch (error) {
    proc.kill("SIGKILL");
    throw new Error(`${error.message}\n${stderr}`);
  }
  return {
    url,
    async stop() {
      if (proc.exitCode === null) proc.kill("SIGINT");
      const timer = setTimeout(() => proc.kill("SIGKILL"), 20_000);
      const { code, signal } = await exited;
      clearTimeout(timer);
      rmSync(dir, { recursive: true, force: true });
      if (code !== 0 && signal !== "SIGKILL") throw new Error(`${BIN} exited ${code ?? signal}:\n${stderr}`);
    },
  };
}
