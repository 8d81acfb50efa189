// A real `tidings serve` for the tests: its own process on a free loopback
// port, SQLite in a temporary directory, tokens minted with its secret; and a
// proxy in front of it that can fail requests or cut streams on demand.

import { spawn } from "node:child_process";
import { createHmac, randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

// The Makefile names the venv's; else whichever `tidings` is on PATH.
const BIN = process.env.TIDINGS_BIN || "tidings";

export function freePort() {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
}

const base64url = (value) => Buffer.from(value).toString("base64url");

// An HS256 JWT as `tidings token` mints it (src/tidings/http/auth.py).
export function mint(secret, subject, { server = false, scopes = [], ttlSeconds } = {}) {
  const now = Math.floor(Date.now() / 1000);
  const claims = { sub: server ? "*" : subject, iat: now };
  const granted = server ? ["server"] : scopes;
  if (granted.length) claims.scope = granted.join(" ");
  if (ttlSeconds !== undefined) claims.exp = now + ttlSeconds;
  const head = `${base64url(JSON.stringify({ alg: "HS256", typ: "JWT" }))}.${base64url(JSON.stringify(claims))}`;
  return `${head}.${createHmac("sha256", secret).update(head).digest("base64url")}`;
}

async function answers(url) {
  try {
    return (await fetch(`${url}/healthz`)).status === 200;
  } catch {
    return false;
  }
}

// {url, secret, token(subject, options), stop()} once /healthz answers.
export async function startServer() {
  const dir = mkdtempSync(join(tmpdir(), "tidings-js-"));
  const port = await freePort();
  const secret = randomBytes(24).toString("hex");
  const url = `http://127.0.0.1:${port}`;
  const argv = ["--database-url", `sqlite:///${join(dir, "x.db")}`, "serve", "--port", String(port)];
  const env = { ...process.env, TIDINGS_SECRET: secret, PYTHONUNBUFFERED: "1" };
  const proc = spawn(BIN, argv, { env, stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  proc.stderr.on("data", (chunk) => (stderr += chunk));
  const exited = new Promise((resolve) => proc.once("exit", (code, signal) => resolve({ code, signal })));
  const failed = new Promise((resolve) => proc.once("error", resolve));
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`${BIN} exited ${proc.exitCode}:\n${stderr}`);
    if (await answers(url)) break;
    const error = await Promise.race([failed, new Promise((r) => setTimeout(r, 100, null))]);
    if (error) throw new Error(`could not start ${BIN} (set TIDINGS_BIN): ${error.message}`);
    if (Date.now() > deadline) {
      proc.kill("SIGKILL");
      throw new Error(`${BIN} did not answer in 30 s:\n${stderr}`);
    }
  }
  return {
    url,
    secret,
    token: (subject, options) => mint(secret, subject, options),
    serverToken: () => mint(secret, "*", { server: true }),
    log: () => stderr,
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

// A proxy to `target` that records every request, and on demand answers the
// next ones matching a rule itself (a status, or a dropped connection) or
// cuts the streams in flight.
export async function startProxy(target) {
  const upstream = new URL(target);
  const seen = [];
  const rules = [];
  const streams = new Set();
  const server = http.createServer((req, res) => {
    seen.push({ method: req.method, url: req.url, headers: req.headers });
    const rule = rules.find((r) => r.times > 0 && r.method === req.method && req.url.startsWith(r.path));
    if (rule) {
      rule.times -= 1;
      req.resume();
      if (rule.drop) return req.socket.destroy();
      res.writeHead(rule.status, { "content-type": "application/problem+json", ...(rule.headers || {}) });
      return res.end(JSON.stringify({ type: "about:blank", title: "Injected", status: rule.status, detail: "injected by the test proxy" }));
    }
    const forward = http.request(
      { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode, answer.headers);
        if ((answer.headers["content-type"] || "").startsWith("text/event-stream")) {
          const entry = { req, res, answer };
          streams.add(entry);
          res.on("close", () => streams.delete(entry));
        }
        answer.pipe(res);
      },
    );
    forward.on("error", () => res.destroy());
    req.pipe(forward);
  });
  const port = await freePort();
  await new Promise((resolve) => server.listen(port, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    // The next `times` requests of `method` to a path starting with `path`.
    fail(method, path, { status = 503, times = 1, drop = false, headers } = {}) {
      rules.push({ method, path, status, times, drop, headers });
    },
    requests: (method, path) => seen.filter((r) => r.method === method && r.url.startsWith(path)),
    openStreams: () => streams.size,
    // Every stream in flight ends as a dropped connection would.
    cutStreams() {
      for (const { res, answer } of streams) {
        answer.destroy();
        res.socket?.destroy();
      }
      streams.clear();
    },
    stop: () =>
      new Promise((resolve) => {
        for (const { res } of streams) res.socket?.destroy();
        server.closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
}

// Polls `check` until it is truthy (or throws after `ms`).
export async function eventually(check, ms = 10_000, what = "the condition") {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
