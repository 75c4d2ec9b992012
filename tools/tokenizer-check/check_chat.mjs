// node check_chat.mjs TOKENIZER DAY0_BINARY: day0's chat-template rendering (`tokenize DIR --jsonl --chat`) against
// @huggingface/jinja on the same tokenizer_config.json chat_template, over a fixed set of conversations (system,
// multi-turn, tools and tool calls, tool results, unicode, roles out of order). Summary: "chat qwen3: N passed, M failed".
import { rng } from "./corpus.mjs";
import { usage, loadJson, runDay0, renderReference, compileTemplate, firstDiff, show, Tally } from "./lib.mjs";

const { name, bin, dir } = usage("check_chat.mjs");
const config = loadJson(`${dir}/tokenizer_config.json`);
if (typeof config.chat_template !== "string") {
  console.log(`${name}: tokenizer_config.json has no chat_template; nothing to check`);
  console.log(`chat ${name}: 0 passed, 0 failed`);
  process.exit(0);
}

const TOOLS = [
  { type: "function", function: { name: "get_weather", description: "Get the current weather for a city",
    parameters: { type: "object", properties: { city: { type: "string", description: "City name, e.g. Zürich" },
      unit: { type: "string", enum: ["celsius", "fahrenheit"] } }, required: ["city"] } } },
  { type: "function", function: { name: "search", description: "Search the web; returns \"title\\nurl\" lines",
    parameters: { type: "object", properties: { query: { type: "string" }, max_results: { type: "integer", minimum: 1, maximum: 50 },
      safe: { type: "boolean" }, score: { type: "number", default: 0.25 } }, required: ["query"] } } },
  { type: "function", function: { name: "run_python", description: "Execute Python code and return its stdout",
    parameters: { type: "object", properties: { code: { type: "string" } }, required: ["code"] } } },
];
const USER = ["What's the weather in Zürich? 🌦️", "東京の天気は？", "Привет! Как дела?", "Explain <|im_start|> and {{ braces }} {% raw %}",
  "Write a function:\n```python\ndef f(x):\n\treturn x * 2\n```", "مرحبا، كيف حالك؟", "   leading and trailing spaces   ", "",
  "Line one\r\nLine two\n\nLine four", "Emoji: 👨‍👩‍👧‍👦 🇯🇵 👍🏽 e\u0301", "안녕하세요 😀", "Tell me a joke about \"quotes\" and 'apostrophes'."];
const ASSISTANT = ["Sure! Here you go.", "Das Wetter ist schön — 21 °C.", "<think>\nThe user wants weather.\n</think>\n\nIt is sunny.",
  "Voilà : « réponse » ✅", "1. first\n2. second\n", "   ", "こんにちは！", "```js\nconsole.log(`x`);\n```"];
const SYSTEM = ["You are a helpful assistant.", "Du bist ein hilfreicher Assistent. Antworte auf Deutsch.",
  "You are Qwen, created by Alibaba Cloud. 你是一个有用的助手。", "Reasoning: high\n\n# Valid channels: analysis, final."];
const CALLS = [["get_weather", { city: "Zürich", unit: "celsius" }], ["search", { query: "día de los muertos 🎃", max_results: 3, safe: true }],
  ["run_python", { code: "print(sum(range(10)))\nprint('done')" }], ["get_weather", { city: "東京" }]];
const RESULTS = ['{"temperature": 21.5, "condition": "sunny ☀️"}', "Результат: 45\ndone", "[{\"title\": \"Día\", \"url\": \"https://x.y/\"}]", "error: timeout"];

const r = rng(4242);
let nextId = 0;
const call = (k, asString) => { const [fn, args] = CALLS[k % CALLS.length];
  return { id: `call_${nextId++}`, type: "function", function: { name: fn, arguments: asString ? JSON.stringify(args) : args } }; };
// One tool-using exchange: assistant tool_calls (content null or ""), their results, the assistant's answer.
function toolTurn(nCalls, { nullContent = true, asString = false } = {}) {
  const calls = r.many(nCalls, () => call(r.int(CALLS.length), asString));
  const msgs = [{ role: "assistant", content: nullContent ? null : "", tool_calls: calls }];
  for (const c of calls) msgs.push({ role: "tool", tool_call_id: c.id, name: c.function.name, content: r.pick(RESULTS) });
  msgs.push({ role: "assistant", content: r.pick(ASSISTANT) });
  return msgs;
}
const u = () => ({ role: "user", content: r.pick(USER) }), a = () => ({ role: "assistant", content: r.pick(ASSISTANT) });
const sys = () => ({ role: "system", content: r.pick(SYSTEM) });
const SHAPES = {
  single_user: () => ({ messages: [u()] }),
  system_user: () => ({ messages: [sys(), u()] }),
  multi_turn: () => ({ messages: [sys(), ...r.many(r.range(2, 4), () => [u(), a()]).flat(), u()] }),
  ends_with_assistant: () => ({ messages: [u(), a()] }),
  no_system_multi: () => ({ messages: [u(), a(), u(), a(), u()] }),
  tool_call_null: () => ({ tools: TOOLS, messages: [sys(), u(), ...toolTurn(1)] }),
  tool_call_empty_string_args: () => ({ tools: TOOLS, messages: [sys(), u(), ...toolTurn(1, { nullContent: false, asString: true })] }),
  tool_call_null_string_args: () => ({ tools: TOOLS, messages: [u(), ...toolTurn(1, { asString: true })] }),
  parallel_calls: () => ({ tools: TOOLS, messages: [u(), ...toolTurn(r.range(2, 3), { nullContent: false, asString: r.chance(0.5) })] }),
  tool_then_followup: () => ({ tools: TOOLS, messages: [sys(), u(), ...toolTurn(1, { nullContent: false }), u()] }),
  tools_no_calls: () => ({ tools: TOOLS.slice(0, r.range(1, 3)), messages: [u()] }),
  pending_tool_result: () => ({ tools: TOOLS, messages: [u(), ...toolTurn(1, { nullContent: false, asString: true }).slice(0, 2)] }),
  reasoning_content: () => ({ messages: [u(), { role: "assistant", content: "Final answer.", reasoning_content: "Let me think… 🤔" }, u()] }),
  thinking_in_content: () => ({ messages: [u(), { role: "assistant", content: ASSISTANT[2] }, u(), { role: "assistant", content: ASSISTANT[2] }] }),
  enable_thinking_false: () => ({ messages: [u()], enable_thinking: false }),
  unicode_heavy: () => ({ messages: [{ role: "system", content: "Ωμέγα ∑ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 \u2028 \u00a0 \u3000" }, { role: "user", content: "🏳️‍🌈🏴󠁧󠁢󠁳󠁣󠁴󠁿 ñ n\u0303 한국어 हिन्दी" }] }),
  second_system_midway: () => ({ messages: [sys(), u(), a(), sys(), u()] }),
  assistant_first: () => ({ messages: [a(), u()] }),
  two_users_in_a_row: () => ({ messages: [u(), u(), a()] }),
  tool_without_call: () => ({ messages: [u(), { role: "tool", tool_call_id: "x", name: "search", content: "orphan" }] }),
};
const requests = [];
for (const [shape, make] of Object.entries(SHAPES)) {
  for (const agp of [false, true]) {
    const req = { ...make(), add_generation_prompt: agp };
    if (req.tools === undefined && r.chance(0.3)) req.tools = null;  // transformers passes tools=None
    requests.push({ shape, req });
  }
}
requests.push({ shape: "add_generation_prompt_omitted", req: { messages: [sys(), u()] } });

const template = compileTemplate(config.chat_template);
const tally = new Tally(name);
const res = runDay0(bin, dir, ["--jsonl", "--chat"], requests.map((x) => x.req));
const quirks = {};
requests.forEach(({ shape, req }, i) => {
  const want = renderReference(template, config, req), got = res.out[i];
  if (want.quirk) quirks[want.quirk] = (quirks[want.quirk] ?? 0) + 1;
  const gotErr = got !== null && typeof got === "object" && !Array.isArray(got) && "error" in got;
  const head = [`request ${i + 1} (${shape}): ${show(req, 400)}`];
  if (want.error !== undefined) {
    if (gotErr) return tally.pass("chat");
    return tally.fail("chat", [...head, `reference raised: ${want.error}`, `day0 rendered: ${show(got)}`]);
  }
  if (gotErr && want.alsoError) return tally.pass("chat");
  if (got === want.text) return tally.pass("chat");
  if (gotErr) return tally.fail("chat", [...head, `day0 error: ${got.error}`, `reference: ${show(want.text)}`]);
  const k = typeof got === "string" ? firstDiff(got, want.text) : 0;
  tally.fail("chat", [...head, `first difference at UTF-16 index ${k}:`,
    `day0:      ${show(typeof got === "string" ? got.slice(Math.max(0, k - 60), k + 80) : got)}`,
    `reference: ${show(want.text.slice(Math.max(0, k - 60), k + 80))}`]);
});
const errors = requests.filter((x) => renderReference(template, config, x.req).error !== undefined).length;
console.log(`${requests.length} conversations, ${errors} of them errors in the reference` +
  (Object.keys(quirks).length ? `; JS-vs-Python jinja departures handled: ${JSON.stringify(quirks)}` : ""));
process.exit(tally.summary());
