#!/usr/bin/env node
// A stand-in for `day0 tokenize` answering from the references themselves, to test the checks: they must pass
// with it, and fail with FAKE_DAY0_BUG=encode|decode|stream|chat|error (each breaks a few lines on purpose).
// FAKE_DAY0_STREAM_BYTES=1 makes it offer --stream-bytes. Not part of any test run.
import { readFileSync } from "node:fs";
import { basename, dirname } from "node:path";
import { loadReference, loadJson, renderReference, compileTemplate, tokenBytes, completePrefix } from "./lib.mjs";

const args = process.argv.slice(2);
const bug = process.env.FAKE_DAY0_BUG ?? "";
const has = (o) => args.includes(o);
if (args[0] !== "tokenize") { console.error("error: fake_day0 knows only `tokenize`"); process.exit(1); }
if (has("--help")) {
  console.log(`Usage: day0 tokenize DIR [--jsonl [--decode [--stream${process.env.FAKE_DAY0_STREAM_BYTES ? "|--stream-bytes" : ""}]] [--chat]] [--bench FILE]`);
  process.exit(0);
}
const dir = args[1];
const name = basename(dirname(dir)).replace(/^tokenizer-/, "");
const ref = loadReference(name);

if (has("--bench")) {
  const text = readFileSync(args[args.indexOf("--bench") + 1], "utf8");
  ref.encode(text.slice(0, 100000));
  const t0 = process.hrtime.bigint(), ids = ref.encode(text), s = Number(process.hrtime.bigint() - t0) / 1e9;
  const bytes = Buffer.byteLength(text);
  console.log(JSON.stringify({ bytes, seconds: s, mb_per_s: bytes / 1e6 / s, tokens: ids.length }));
  process.exit(0);
}

const lines = readFileSync(0, "utf8").split("\n").filter((l) => l !== "");
const template = has("--chat") && typeof ref.config.chat_template === "string" ? compileTemplate(ref.config.chat_template) : null;
const bytesOf = tokenBytes(ref);
const out = lines.map((line, i) => {
  const x = JSON.parse(line);
  if (bug === "error" && i % 500 === 7) return { error: "injected failure" };
  if (has("--chat")) {
    if (!template) return { error: "no chat template" };
    const r = renderReference(template, loadJson(`${dir}/tokenizer_config.json`), x);
    if (r.error !== undefined) return { error: r.error };
    return bug === "chat" && i % 7 === 3 ? r.text.trimEnd() : r.text;
  }
  if (!has("--decode")) {
    const ids = ref.encode(x);
    if (bug === "encode" && /\d{4}/.test(x)) ids.splice(ids.length >> 1, 1);
    return ids;
  }
  if (has("--stream") || has("--stream-bytes")) {  // one piece a pushed id, then finish()
    let buf = Buffer.alloc(0), done = 0;
    const pieces = x.map((id) => {
      buf = Buffer.concat([buf, bytesOf(id)]);
      const upto = bug === "stream" ? buf.length : completePrefix(buf), p = buf.subarray(done, upto);
      done = upto;
      return p;
    });
    pieces.push(buf.subarray(done));
    return has("--stream-bytes") ? pieces.map((p) => [...p]) : pieces.map((p) => p.toString("utf8"));
  }
  const text = ref.decode(x);
  return bug === "decode" && text.includes("é") ? text.normalize("NFD") : text;
});
process.stdout.write(out.map((o) => JSON.stringify(o)).join("\n") + (out.length ? "\n" : ""));
