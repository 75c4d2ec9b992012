// The official openai npm client against `day0 serve` on the bundled model: models, completions and chat, whole
// and streamed (the same text), usage, stop strings, the client's typed errors (400 with param, 404, 401), an
// aborted stream freeing its KV blocks, and a clean SIGTERM exit. Prints one line per check, then
// "N passed, M failed"; exits 1 on any failure.
// Usage: node check.mjs DAY0_BINARY [MODEL_DIR]
import assert from "node:assert/strict";
import OpenAI from "openai";
import { bundledModel, chatTemplate, metric, startServer } from "./lib.mjs";

const [bin, dir = bundledModel] = process.argv.slice(2);
if (!bin) {
  console.error("usage: node check.mjs DAY0_BINARY [MODEL_DIR]");
  process.exit(2);
}
const KEY = "sk-serve-check";
const server = await startServer(bin, dir, ["--chat-template", chatTemplate, "--api-key", KEY, "--kv-tokens", "8192"]);
const client = new OpenAI({ apiKey: KEY, baseURL: `${server.url}/v1`, maxRetries: 0, timeout: 60_000 });
const greedy = { temperature: 0, max_tokens: 12 };

async function collect(stream) {
  let text = "", finish = null, usage = null, chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    if (chunk.usage) usage = chunk.usage;
    const choice = chunk.choices[0];
    if (!choice) continue;
    text += choice.text ?? choice.delta?.content ?? "";
    if (choice.finish_reason) finish = choice.finish_reason;
  }
  return { text, finish, usage, chunks };
}

const checks = {
  async models_lists_the_bundled_model() {
    const page = await client.models.list();
    assert.deepEqual(page.data.map((m) => m.id), ["pycoder-tiny"]);
  },
  async completion_whole_has_text_usage_and_length() {
    const r = await client.completions.create({ model: "pycoder-tiny", prompt: "def fibonacci(n):", ...greedy });
    assert.equal(r.object, "text_completion");
    assert.ok(r.choices[0].text.length > 0);
    assert.equal(r.choices[0].finish_reason, "length");
    assert.equal(r.usage.completion_tokens, 12);
    assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + 12);
  },
  async completion_stream_equals_whole_and_reports_usage() {
    const args = { model: "pycoder-tiny", prompt: "class Stack:", ...greedy };
    const whole = await client.completions.create(args);
    const s = await collect(await client.completions.create({ ...args, stream: true, stream_options: { include_usage: true } }));
    assert.equal(s.text, whole.choices[0].text);
    assert.equal(s.finish, "length");
    assert.equal(s.usage?.completion_tokens, 12);
    assert.ok(s.chunks > 2);
  },
  async chat_whole_renders_the_template() {
    const r = await client.chat.completions.create({
      model: "pycoder-tiny", messages: [{ role: "user", content: "sort a list" }], ...greedy,
    });
    assert.equal(r.object, "chat.completion");
    assert.equal(r.choices[0].message.role, "assistant");
    const plain = await client.completions.create({ model: "pycoder-tiny", prompt: "# user: sort a list\n# assistant:\n", ...greedy });
    assert.equal(r.choices[0].message.content, plain.choices[0].text);
  },
  async chat_stream_equals_whole() {
    const args = { model: "pycoder-tiny", messages: [{ role: "system", content: "Python only." }, { role: "user", content: "read a file" }], ...greedy };
    const whole = await client.chat.completions.create(args);
    const s = await collect(await client.chat.completions.create({ ...args, stream: true, stream_options: { include_usage: true } }));
    assert.equal(s.text, whole.choices[0].message.content);
    assert.equal(s.usage?.prompt_tokens, whole.usage.prompt_tokens);
  },
  async stop_string_cuts_the_output() {
    const free = await client.completions.create({ model: "pycoder-tiny", prompt: "import os\n", temperature: 0, max_tokens: 24 });
    const text = free.choices[0].text;
    const stop = text.slice(4, 7);
    const cut = await client.completions.create({ model: "pycoder-tiny", prompt: "import os\n", temperature: 0, max_tokens: 24, stop });
    assert.equal(cut.choices[0].text, text.slice(0, text.indexOf(stop)));
    assert.equal(cut.choices[0].finish_reason, "stop");
  },
  async out_of_range_parameter_is_a_bad_request_naming_it() {
    await assert.rejects(
      client.completions.create({ model: "pycoder-tiny", prompt: "x", temperature: 5 }),
      (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === "temperature" && e.type === "invalid_request_error",
    );
  },
  async over_the_context_is_context_length_exceeded() {
    await assert.rejects(
      client.completions.create({ model: "pycoder-tiny", prompt: "x", max_tokens: 5000 }),
      (e) => e instanceof OpenAI.BadRequestError && e.code === "context_length_exceeded",
    );
  },
  async unknown_model_is_not_found() {
    await assert.rejects(
      client.completions.create({ model: "gpt-4o", prompt: "x" }),
      (e) => e instanceof OpenAI.NotFoundError && e.param === "model",
    );
  },
  async wrong_api_key_is_an_authentication_error() {
    const wrong = new OpenAI({ apiKey: "sk-wrong", baseURL: `${server.url}/v1`, maxRetries: 0 });
    await assert.rejects(wrong.models.list(), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
  },
  async aborted_stream_frees_its_blocks() {
    const controller = new AbortController();
    const stream = await client.completions.create(
      { model: "pycoder-tiny", prompt: "import os\n", temperature: 0, max_tokens: 800, stream: true, ignore_eos: true },
      { signal: controller.signal },
    );
    let chunks = 0;
    try {
      for await (const _ of stream) if (++chunks === 3) controller.abort();
    } catch (e) {
      if (!(e instanceof OpenAI.APIUserAbortError) && e?.name !== "AbortError") throw e;
    }
    assert.equal(chunks, 3);
    const deadline = Date.now() + 5000;
    while (Date.now() < deadline && ((await metric(server.url, "day0_kv_blocks_used")) !== 0 || (await metric(server.url, "day0_requests_running")) !== 0))
      await new Promise((r) => setTimeout(r, 20));
    assert.equal(await metric(server.url, "day0_kv_blocks_used"), 0);
    assert.ok((await metric(server.url, "day0_client_disconnects_total")) >= 1);
    assert.ok((await metric(server.url, "day0_generation_tokens_total")) < 700);
  },
};

let passed = 0, failed = 0;
for (const [name, run] of Object.entries(checks)) {
  try {
    await run();
    passed++;
    console.log(`ok   ${name}`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${e?.stack ?? e}`);
  }
}
const stopError = await server.stop();
if (stopError) {
  failed++;
  console.log(`FAIL sigterm_exits_0: ${stopError}\n${server.output()}`);
} else {
  passed++;
  console.log("ok   sigterm_exits_0");
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
