// Load benchmark (not a test): N concurrent clients, each a loop of streamed completions with the official openai
// client, at several concurrency levels. Reports requests/s, output tokens/s, and p50/p99 time to first token and
// inter-token latency as the clients see them, plus the largest batch the engine ran and the server's own mean time to
// first token (from /metrics). The clients run in several worker processes (one per 8 by default): one Node.js
// process saturates at ~30 streaming clients of a fast server, and then its own event loop is what it measures.
// Usage: node bench.mjs DAY0_BINARY [--levels 1,8,32,128] [--rounds 2] [--max-tokens 64] [--model-dir DIR]
//        [--backend cpu|cuda] [--url URL (an already running server; DAY0_API_KEY is used as its key)] [--json]
//        [--sampled-every K (every K-th client samples at temperature 1 instead of decoding greedily: mixed steps)]
//        [--top-p P (the sampled clients' top_p, default 1: drawn on the device with its cutoff)]
//        [--presence-penalty P] [--frequency-penalty F] [--repetition-penalty R] (the sampled clients' penalties,
//        default none: applied on the device before the draw)]
//        [--logprobs N (every client asks for logprobs with its N most likely tokens, 0 to 20)]
//        [--serve-arg ARG ... (passed on to the server it starts, e.g. --serve-arg=--no-launch-ahead; its KV pool is
//        the server's default, all the GPU memory the weights leave, unless one sets --kv-tokens)]
//        [--clients-per-process N (default 8)]
import { fork } from "node:child_process";
import { availableParallelism } from "node:os";
import { fileURLToPath } from "node:url";
import OpenAI from "openai";
import { bundledModel, metric, percentile, startServer } from "./lib.mjs";

function options(argv) {
  const o = { levels: [1, 8, 32, 128], rounds: 2, maxTokens: 64, modelDir: bundledModel, backend: "cpu", url: null, json: false,
              sampledEvery: 0, topP: 1, penalties: {}, logprobs: null, serveArgs: [], clientsPerProcess: 8 };
  const rest = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i], next = () => argv[++i];
    if (a === "--levels") o.levels = next().split(",").map(Number);
    else if (a === "--rounds") o.rounds = Number(next());
    else if (a === "--max-tokens") o.maxTokens = Number(next());
    else if (a === "--model-dir") o.modelDir = next();
    else if (a === "--backend") o.backend = next();
    else if (a === "--url") o.url = next();
    else if (a === "--json") o.json = true;
    else if (a === "--sampled-every") o.sampledEvery = Number(next());
    else if (a === "--top-p") o.topP = Number(next());
    else if (a === "--presence-penalty") o.penalties.presence_penalty = Number(next());
    else if (a === "--frequency-penalty") o.penalties.frequency_penalty = Number(next());
    else if (a === "--repetition-penalty") o.penalties.repetition_penalty = Number(next());
    else if (a === "--logprobs") o.logprobs = Number(next());
    else if (a === "--serve-arg") o.serveArgs.push(next());
    else if (a === "--clients-per-process") o.clientsPerProcess = Number(next());
    else if (a.startsWith("--serve-arg=")) o.serveArgs.push(a.slice("--serve-arg=".length));
    else rest.push(a);
  }
  o.bin = rest[0];
  if (!o.bin && !o.url) {
    console.error("usage: node bench.mjs DAY0_BINARY [--levels 1,8,32,128] [--rounds 2] [--max-tokens 64] [--url URL]");
    process.exit(2);
  }
  return o;
}

// Short Python openings, so that prompts differ (no prefix-cache shortcut) yet stay realistic for the model.
const PROMPTS = [
  "def fibonacci(n):", "import os\nimport sys\n", "class Stack:\n    def __init__(self):", "for i in range(10):",
  "def read_lines(path):", "with open(path) as f:", "def parse_args(argv):", "class Config(object):",
  "try:\n    import json\nexcept ImportError:", "def main():\n    args = parse_args()", "@property\ndef name(self):",
  "if __name__ == \"__main__\":",
];

// One streamed request of a client; `load` holds the level's settings (maxTokens, topP, penalties, logprobs).
async function one(client, prompt, temperature, load, stats) {
  const t0 = performance.now();
  let last = null, first = null;
  const stream = await client.completions.create({
    model: stats.model, prompt, max_tokens: load.maxTokens, temperature, top_p: temperature > 0 ? load.topP : 1,
    ignore_eos: true,
    ...(temperature > 0 ? load.penalties : {}),
    ...(load.logprobs === null ? {} : { logprobs: load.logprobs }),
    stream: true,
    stream_options: { include_usage: true },
  });
  for await (const chunk of stream) {
    if (chunk.usage) stats.tokens += chunk.usage.completion_tokens;
    const text = chunk.choices[0]?.text;
    if (!text) continue;
    const now = performance.now();
    if (first === null) {
      first = now;
      stats.ttft.push(now - t0);
    } else {
      stats.itl.push(now - last);
    }
    last = now;
  }
  stats.requests++;
}

// The server's own time to first token (its /metrics histogram's sum and count): over a level, the mean from
// arrival to first token without the client's side, which a saturated client would add to what it measures.
async function serverTtft(url) {
  const name = "day0_time_to_first_token_seconds";
  return { sum: await metric(url, `${name}_sum`), count: await metric(url, `${name}_count`) };
}

// A worker process (bench.mjs --worker): takes its job (the level's settings and its client numbers) from the parent,
// says "ready" once its client exists, runs on "go" and sends its stats back.
function worker() {
  process.once("message", async (job) => {
    const client = new OpenAI({ apiKey: job.key, baseURL: `${job.url}/v1`, maxRetries: 0, timeout: 600_000 });
    const stats = { model: job.model, requests: 0, tokens: 0, ttft: [], itl: [] };
    process.send("ready");
    await new Promise((res) => process.once("message", res));
    await Promise.all(
      job.clients.map(async (c) => {
        const temperature = job.sampledEvery > 0 && c % job.sampledEvery === 0 ? 1 : 0;
        for (let r = 0; r < job.rounds; r++)
          await one(client, PROMPTS[(c + r * 5) % PROMPTS.length], temperature, job, stats);
      }),
    );
    process.send(stats, () => process.disconnect());
  });
}

// Clients 0 .. clients - 1 dealt round-robin over the worker processes; timed from "go" to the last one's stats.
// `load`: { rounds, maxTokens, sampledEvery, topP, penalties, logprobs }, sent to every worker as it is.
async function level(url, key, model, clients, load, perProcess) {
  const n = Math.max(1, Math.min(Math.ceil(clients / perProcess), availableParallelism()));
  const workers = Array.from({ length: n }, () =>
    fork(fileURLToPath(import.meta.url), ["--worker"], { stdio: ["ignore", "inherit", "inherit", "ipc"] }));
  const next = (w) => new Promise((res, rej) => {
    w.once("message", res);
    w.once("exit", (code) => rej(new Error(`a benchmark worker exited (${code}) before it reported`)));
  });
  const ready = workers.map(next);
  workers.forEach((w, i) => w.send({
    url, key, model, ...load,
    clients: Array.from({ length: clients }, (_, c) => c).filter((c) => c % n === i),
  }));
  await Promise.all(ready);
  const before = await serverTtft(url);
  const done = workers.map(next);
  const t0 = performance.now();
  for (const w of workers) w.send("go");
  const parts = await Promise.all(done);
  const seconds = (performance.now() - t0) / 1000;
  const stats = { requests: 0, tokens: 0, ttft: [], itl: [] };
  for (const p of parts) {
    stats.requests += p.requests;
    stats.tokens += p.tokens;
    for (const v of p.ttft) stats.ttft.push(v);
    for (const v of p.itl) stats.itl.push(v);
  }
  const after = await serverTtft(url);
  const sorted = (a) => [...a].sort((x, y) => x - y);
  const ttft = sorted(stats.ttft), itl = sorted(stats.itl);
  return {
    clients, processes: n, requests: stats.requests, seconds, requests_per_s: stats.requests / seconds, output_tokens_per_s: stats.tokens / seconds,
    ttft_p50_ms: percentile(ttft, 50), ttft_p99_ms: percentile(ttft, 99), itl_p50_ms: percentile(itl, 50), itl_p99_ms: percentile(itl, 99),
    server_ttft_mean_ms: (1000 * (after.sum - before.sum)) / (after.count - before.count),
    max_step_sequences: await metric(url, "day0_engine_max_step_sequences"),
    device_edited_rows_total: await metric(url, "day0_engine_device_edited_rows_total"),
  };
}

if (process.argv[2] === "--worker") worker();
else await main();

async function main() {
  const o = options(process.argv.slice(2));
  const key = o.url ? process.env.DAY0_API_KEY ?? "unused" : "unused";
  const maxClients = Math.max(...o.levels);
  const server = o.url ? null : await startServer(o.bin, o.modelDir, [
    "--backend", o.backend, "--max-running", String(Math.max(64, maxClients)), "--max-waiting", String(4 * maxClients),
    "--max-connections", String(maxClients + 64),
    ...o.serveArgs,
  ]);
  const url = o.url ?? server.url;
  const models = await (await fetch(`${url}/v1/models`, { headers: { Authorization: `Bearer ${key}` } })).json();
  const model = models.data[0].id;
  // Warms the server's connections and the page cache (one client: one worker).
  const warmUp = { rounds: 1, maxTokens: 8, sampledEvery: 0, topP: 1, penalties: {}, logprobs: null };
  await level(url, key, model, 1, warmUp, o.clientsPerProcess);
  const load = { rounds: o.rounds, maxTokens: o.maxTokens, sampledEvery: o.sampledEvery, topP: o.topP,
                 penalties: o.penalties, logprobs: o.logprobs };
  const rows = [];
  for (const clients of o.levels) rows.push(await level(url, key, model, clients, load, o.clientsPerProcess));
  if (server) await server.stop();

  const f = (v, d = 1) => (Number.isFinite(v) ? v.toFixed(d) : "-");
  if (o.json) {
    console.log(JSON.stringify({ model, backend: o.backend, max_tokens: o.maxTokens, rounds: o.rounds,
                                 sampled_every: o.sampledEvery, top_p: o.topP, penalties: o.penalties, logprobs: o.logprobs, serve_args: o.serveArgs, rows }, null, 1));
  } else {
    console.log(`day0 serve load benchmark: model ${model}, ${o.backend} backend, ${o.maxTokens} output tokens per request, ` +
                `${o.rounds} requests per client, streamed, ` +
                (o.sampledEvery > 0 ? `one client in ${o.sampledEvery} sampled at temperature 1, top_p ${o.topP}` +
                 (Object.keys(o.penalties).length > 0 ? `, ${JSON.stringify(o.penalties)}` : "") + ", the rest greedy" : "greedy") +
                (o.logprobs === null ? "" : `, every client with logprobs (top ${o.logprobs})`) +
                (o.serveArgs.length > 0 ? `, server args: ${o.serveArgs.join(" ")}` : ""));
    console.log("clients  requests  req/s   out tok/s  TTFT p50 ms  TTFT p99 ms  ITL p50 ms  ITL p99 ms  max batch" +
                "  server TTFT mean ms  processes");
    for (const r of rows)
      console.log(`${String(r.clients).padStart(7)}  ${String(r.requests).padStart(8)}  ${f(r.requests_per_s, 2).padStart(5)}  ` +
                  `${f(r.output_tokens_per_s).padStart(9)}  ${f(r.ttft_p50_ms).padStart(11)}  ${f(r.ttft_p99_ms).padStart(11)}  ` +
                  `${f(r.itl_p50_ms).padStart(10)}  ${f(r.itl_p99_ms).padStart(10)}  ${String(r.max_step_sequences).padStart(9)}` +
                  `  ${f(r.server_ttft_mean_ms).padStart(19)}  ${String(r.processes).padStart(9)}`);
  }
}
