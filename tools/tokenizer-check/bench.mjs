// node bench.mjs DAY0_BINARY [MB]: encode throughput, one thread, on ~4 MB of deterministic mixed text: tiktoken's
// o200k_base (Rust via WASM), @huggingface/tokenizers on gpt-oss's tokenizer.json, and `day0 tokenize DIR --bench FILE`;
// also whether tiktoken's ids equal day0's on a sample. A benchmark, not a test: exits 0 unless something fails to run.
import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { get_encoding } from "tiktoken";
import { mixedText, generateCorpus } from "./corpus.mjs";
import { loadReference, modelDir, runDay0, firstDiff, show } from "./lib.mjs";

const bin = process.argv[2];
const mb = Number(process.argv[3] ?? 4);
if (!bin || !(mb > 0)) { console.error("usage: node bench.mjs DAY0_BINARY [MB]"); process.exit(2); }
const dir = modelDir("gptoss");
const text = mixedText(mb * 1e6);
const bytes = Buffer.byteLength(text);
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2; };

// Median seconds of `reps` timed runs after one untimed warm-up run.
function time(fn, reps = 5) {
  fn();
  const ts = [];
  for (let i = 0; i < reps; i++) { const t0 = process.hrtime.bigint(); fn(); ts.push(Number(process.hrtime.bigint() - t0) / 1e9); }
  return median(ts);
}

const tik = get_encoding("o200k_base");
const ref = loadReference("gptoss");
let nTik = 0, nHf = 0;
const results = [
  { impl: "tiktoken o200k_base (WASM)", seconds: time(() => { nTik = tik.encode(text).length; }) },
  { impl: "@huggingface/tokenizers (JS)", seconds: time(() => { nHf = ref.encode(text).length; }) },
];

// day0: its own timing (one thread), the median of three runs.
const dir0 = mkdtempSync(join(tmpdir(), "day0-bench-"));
const file = join(dir0, "bench.txt");
writeFileSync(file, text);
const day0Runs = [];
for (let i = 0; i < 3; i++) {
  const p = spawnSync(bin, ["tokenize", dir, "--bench", file], { encoding: "utf8", maxBuffer: 1 << 26 });
  const line = (p.stdout ?? "").trim().split("\n").reverse().find((l) => l.startsWith("{"));
  let j = null;
  try { j = JSON.parse(line); } catch { /* reported below */ }
  if (p.status !== 0 || !j || !(j.mb_per_s > 0)) {
    console.error(`day0 --bench failed (exit ${p.status ?? p.error?.message}): ${(p.stderr || p.stdout || "").trim().slice(0, 400)}`);
    break;
  }
  // day0 may encode the file several times: its bytes/seconds are totals, mb_per_s their ratio.
  if (j.bytes % bytes !== 0) console.error(`note: day0 reports ${j.bytes} bytes, not a multiple of the file's ${bytes}`);
  day0Runs.push(j.mb_per_s);
}
rmSync(dir0, { recursive: true, force: true });
if (day0Runs.length) results.push({ impl: "day0 (C++, 1 thread)", seconds: bytes / 1e6 / median(day0Runs) });

const mbps = (s) => bytes / 1e6 / s;
const day0 = results.find((x) => x.impl.startsWith("day0"));
console.log(`${(bytes / 1e6).toFixed(2)} MB of mixed text, ${text.length} UTF-16 units; tokens: tiktoken ${nTik}, HF ${nHf}`);
console.log(`${"implementation".padEnd(32)} ${"MB/s".padStart(9)}  ${"day0 speed / this".padStart(17)}`);
for (const x of results)
  console.log(`${x.impl.padEnd(32)} ${mbps(x.seconds).toFixed(2).padStart(9)}  ${day0 ? (x.seconds / day0.seconds).toFixed(2).padStart(17) : "-".padStart(17)}`);
if (!day0) console.log("day0: no result (see above)");

// Ids: tiktoken o200k_base vs day0 (and vs the HF reference) on a sample of lines and corpus strings. The two
// vocabularies differ in special tokens only: o200k_base has 2, gpt-oss's tokenizer.json its own set.
const o200kSpecial = { "<|endoftext|>": 199999, "<|endofprompt|>": 200018 };
const gptossAdded = Object.fromEntries(ref.json.added_tokens.map((a) => [a.content, a.id]));
for (const [t, id] of Object.entries(o200kSpecial))
  console.log(`special ${t}: o200k_base ${id}, gpt-oss tokenizer.json ${gptossAdded[t] ?? "absent (encoded as ordinary text)"}`);
const onlyGptoss = Object.keys(gptossAdded).filter((t) => !(t in o200kSpecial));
console.log(`gpt-oss-only added tokens: ${onlyGptoss.length} (${onlyGptoss.slice(0, 8).join(" ")} ...)`);
const specials = [...onlyGptoss, ...Object.keys(o200kSpecial)];
const sample = [...text.split("\n").slice(0, 3000), ...generateCorpus().map((e) => e.text)]
  .filter((s) => !specials.some((t) => s.includes(t)));
const tikIds = sample.map((s) => Array.from(tik.encode_ordinary(s)));
const same = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);
const hfSame = sample.filter((s, i) => same(tikIds[i], ref.encode(s))).length;
console.log(`tiktoken o200k_base vs @huggingface/tokenizers gpt-oss: ${hfSame}/${sample.length} strings with equal ids (no special-token text)`);
try {
  const d = runDay0(bin, dir, ["--jsonl"], sample);
  let ok = 0, shown = 0;
  sample.forEach((s, i) => {
    const got = d.out[i];
    if (Array.isArray(got) && same(got, tikIds[i])) return ok++;
    if (shown++ < 3) console.log(`  differs: ${show(s, 120)} at index ${Array.isArray(got) ? firstDiff(got, tikIds[i]) : "-"}: day0 ${show(got, 160)}`);
  });
  console.log(`tiktoken o200k_base vs day0: ${ok}/${sample.length} strings with equal ids`);
} catch (e) {
  console.log(`tiktoken o200k_base vs day0: not run (${e.message})`);
}
tik.free();
