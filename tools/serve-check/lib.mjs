// Shared by check.mjs and bench.mjs: starting `day0 serve` on a free port and waiting for its ready line,
// stopping it with SIGTERM (it must drain and exit 0), and reading one sample of its /metrics.
import { spawn } from "node:child_process";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
export const bundledModel = `${repoRoot}/models/pycoder-tiny`;
// The bundled model ships no chat template; this test template turns each turn into a Python comment.
export const chatTemplate = `${repoRoot}/tests/data/chat_templates/pycoder_comments.jinja`;

// Starts `bin serve dir --port 0 ...args`; resolves to {url, port, stop(), output()} once it prints "ready on".
export function startServer(bin, dir, args = [], { env = {}, timeoutMs = 120_000 } = {}) {
  const child = spawn(bin, ["serve", dir, "--port", "0", ...args], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "", err = "";
  child.stdout.on("data", (d) => (out += d));
  child.stderr.on("data", (d) => (err += d));
  const exited = new Promise((res) => child.on("exit", (code, signal) => res({ code, signal })));
  return new Promise((res, rej) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      rej(new Error(`day0 serve not ready within ${timeoutMs} ms:\n${out}${err}`));
    }, timeoutMs);
    exited.then(({ code, signal }) => {
      clearTimeout(timer);
      rej(new Error(`day0 serve exited (${code ?? signal}) before it was ready:\n${out}${err}`));
    });
    const poll = setInterval(() => {
      const m = out.match(/ready on http:\/\/([^:\s]+):(\d+)/);
      if (!m) return;
      clearInterval(poll);
      clearTimeout(timer);
      const port = Number(m[2]);
      res({
        port,
        url: `http://${m[1]}:${port}`,
        output: () => out + err,
        // SIGTERM: the server drains and must exit 0.
        stop: async () => {
          child.kill("SIGTERM");
          const { code, signal } = await exited;
          return code === 0 ? null : `day0 serve exited with ${code ?? signal} after SIGTERM`;
        },
      });
    }, 20);
    exited.then(() => clearInterval(poll));
  });
}

// One sample of GET /metrics ("name" or "name{labels}"), or NaN.
export async function metric(url, sample) {
  const text = await (await fetch(`${url}/metrics`)).text();
  for (const line of text.split("\n")) if (line.startsWith(sample + " ")) return Number(line.slice(sample.length + 1));
  return NaN;
}

export function percentile(sorted, p) {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i];
}
