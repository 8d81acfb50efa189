// A real `tidings serve` with getstream's v2 protocol on: its own process on a
// free loopback port, one Stream api key; SQLite in a temporary directory, or
// with GETSTREAM_DEPLOYMENT=postgres+redis a private PostgreSQL and
// redis-server (started by stores.py with the Python suite's own classes).
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

import { eventually, freePort } from "../../clients/js/test/server.mjs";

// The Makefile names the venv's; else whichever `tidings` is on PATH.
const BIN = process.env.TIDINGS_BIN || "tidings";

export const KEY = "tidings-app";
export const SECRET = "s3cret-".repeat(6);
export const GROUPS = ["user", "timeline", "timeline_aggregated", "notification"];

export const DEPLOYMENT = process.env.GETSTREAM_DEPLOYMENT || "sqlite";

// The private PostgreSQL and Redis: {database_url, redis_url, stop()}. They
// stop when stores.py's standard input closes, so with this process too.
async function startStores() {
  // The venv's python sits beside its tidings.
  const python = process.env.TIDINGS_BIN ? join(dirname(BIN), "python") : "python3";
  const script = join(dirname(fileURLToPath(import.meta.url)), "stores.py");
  const proc = spawn(python, [script], { stdio: ["pipe", "pipe", "inherit"] });
  const exited = new Promise((resolve) => proc.once("exit", resolve));
  const first = createInterface({ input: proc.stdout })[Symbol.asyncIterator]().next();
  const line = await Promise.race([first.then((r) => r.value), exited.then(() => null)]);
  if (!line) throw new Error(`${script} exited ${proc.exitCode} before its servers answered`);
  return { ...JSON.parse(line), stop: async () => { proc.stdin.end(); await exited; } };
}

// {url, stop()} once /healthz answers.
export async function startServer() {
  const dir = mkdtempSync(join(tmpdir(), "tidings-getstream-js-"));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  let database = `sqlite:///${join(dir, "x.db")}`;
  let stores = null;
  if (DEPLOYMENT === "postgres+redis") {
    stores = await startStores();
    database = stores.database_url;
  } else if (DEPLOYMENT !== "sqlite") {
    throw new Error(`GETSTREAM_DEPLOYMENT: sqlite or postgres+redis, not ${DEPLOYMENT}`);
  }
  const argv = ["--database-url", database, "serve", "--port", String(port)];
  const env = {
    ...process.env,
    ...(stores ? { TIDINGS_REDIS_URL: stores.redis_url } : {}),
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
    await stores?.stop();
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
      await stores?.stop();
      if (code !== 0 && signal !== "SIGKILL") throw new Error(`${BIN} exited ${code ?? signal}:\n${stderr}`);
    },
  };
}
