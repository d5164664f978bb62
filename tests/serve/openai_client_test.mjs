#!/usr/bin/env node
// End-to-end test of `tessera serve` with the official OpenAI client for Node.js (openai@4, from
// scripts/fetch-models.sh): the server must answer what the client sends and the client must
// accept what the server answers (see docs/serve_api_draft.md).
//
//   node tests/serve/openai_client_test.mjs --tessera BUILD/tessera [--model FILE.gguf]
//        [--startup-timeout 60]
//
// Starts `tessera serve` (by default with no model: the built-in one) on a free port of 127.0.0.1,
// waits for GET /health, then checks: models.list (one model); completions non-streaming
// (max_tokens 8, temperature 0) and streaming with stream_options.include_usage (the same text and
// usage); chat completions likewise; errors (unknown model: 404, max_tokens -1: 400); GET /metrics.
// The server is always stopped at the end; its output is printed when a check fails.
// Exit status: 0 passed, 1 failed, 77 skipped (openai not installed: run scripts/fetch-models.sh).
// The client is loaded from $TESSERA_NODE_PREFIX or <repo>/.cache/node.
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const SKIP = 77;
const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO_ROOT = path.resolve(HERE, '..', '..');
const MAX_TOKENS = 8;

function parseArgs(argv) {
  const o = { startupTimeout: 60 };
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    const v = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    switch (a) {
      case '--tessera': o.tessera = v(); break;
      case '--model': o.model = v(); break;
      case '--startup-timeout': o.startupTimeout = Number(v()); break;
      default: throw new Error(`unknown argument '${a}'`);
    }
  }
  if (!o.tessera) throw new Error('--tessera PATH is required');
  if (!(o.startupTimeout > 0)) throw new Error('--startup-timeout expects seconds > 0');
  return o;
}

function loadOpenAI() {
  const prefix = process.env.TESSERA_NODE_PREFIX || path.join(REPO_ROOT, '.cache', 'node');
  const req = createRequire(path.join(prefix, 'node_modules', 'noop.js'));
  try {
    return req('openai');
  } catch (e) {
    return null;
  }
}

// A port nobody listens on now: bind port 0, read the port the OS chose, close.
function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

// A check that failed (reported without a stack, unlike an unexpected error).
class TestFailure extends Error {}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

class Server {
  constructor(tessera, args) {
    this.output = '';
    this.exited = null;  // {code, signal} once the process ended
    this.proc = spawn(tessera, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    const keep = (d) => {
      this.output += d.toString();
      if (this.output.length > 200000) this.output = this.output.slice(-100000);
    };
    this.proc.stdout.on('data', keep);
    this.proc.stderr.on('data', keep);
    this.done = new Promise((resolve) => {
      this.proc.on('exit', (code, signal) => {
        this.exited = { code, signal };
        resolve();
      });
      this.proc.on('error', (e) => {
        this.output += `\n(could not start ${tessera}: ${e.message})\n`;
        this.exited = { code: null, signal: null };
        resolve();
      });
    });
  }

  async waitHealthy(base, timeoutS) {
    const deadline = Date.now() + timeoutS * 1000;
    let last = '';
    while (Date.now() < deadline) {
      if (this.exited) throw new TestFailure(`the server exited (${JSON.stringify(this.exited)}) before /health answered`);
      try {
        const r = await fetch(`${base}/health`, { signal: AbortSignal.timeout(2000) });
        if (r.status === 200) return;
        last = `status ${r.status}`;
      } catch (e) {
        last = e.message;
      }
      await sleep(200);
    }
    throw new TestFailure(`GET /health did not answer 200 within ${timeoutS} s (last: ${last})`);
  }

  async stop() {
    if (this.exited) return;
    this.proc.kill('SIGTERM');
    const t = setTimeout(() => { if (!this.exited) this.proc.kill('SIGKILL'); }, 5000);
    await this.done;
    clearTimeout(t);
  }
}

function check(cond, what) {
  if (!cond) throw new TestFailure(`check failed: ${what}`);
}

function checkUsage(usage, what) {
  check(usage && Number.isInteger(usage.prompt_tokens) && usage.prompt_tokens > 0,
    `${what}: usage.prompt_tokens is a positive integer (${JSON.stringify(usage)})`);
  check(Number.isInteger(usage.completion_tokens) && usage.completion_tokens <= MAX_TOKENS,
    `${what}: usage.completion_tokens <= ${MAX_TOKENS} (${JSON.stringify(usage)})`);
  check(usage.total_tokens === usage.prompt_tokens + usage.completion_tokens,
    `${what}: usage.total_tokens = prompt + completion (${JSON.stringify(usage)})`);
}

function checkFinish(finish, usage, what) {
  check(finish === 'length' || finish === 'stop', `${what}: finish_reason is length or stop, not ${finish}`);
  if (finish === 'length') {
    check(usage.completion_tokens === MAX_TOKENS,
      `${what}: finish_reason length means ${MAX_TOKENS} tokens, got ${usage.completion_tokens}`);
  }
}

// Runs fn, which must throw the client's error for an HTTP `status` answer.
async function expectError(mod, status, fn, what) {
  let err = null;
  try {
    await fn();
  } catch (e) {
    err = e;
  }
  check(err !== null, `${what}: the request failed`);
  check(err instanceof mod.APIError, `${what}: an openai.APIError, got ${err}`);
  check(err.status === status, `${what}: status ${status}, got ${err.status} (${err.message})`);
  if (status === 404) check(err instanceof mod.NotFoundError, `${what}: an openai.NotFoundError`);
  if (status === 400) check(err instanceof mod.BadRequestError, `${what}: an openai.BadRequestError`);
  // The body is {"error": {"message", "type", ...}}; the client keeps the inner object.
  check(err.error && typeof err.error.message === 'string' && err.error.message.length > 0,
    `${what}: the body has error.message (${JSON.stringify(err.error)})`);
}

async function runChecks(mod, base) {
  const OpenAI = mod.OpenAI || mod.default;
  // No retries: a 429 or 5xx must show, not be papered over.
  const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'none', maxRetries: 0, timeout: 120000 });
  const log = (s) => console.log(`openai_client_test: ${s}`);

  // models.list
  const models = [];
  for await (const m of client.models.list()) models.push(m);
  check(models.length === 1, `models.list returns one model, got ${models.length}`);
  const model = models[0].id;
  check(typeof model === 'string' && model.length > 0, 'the model has an id');
  check(models[0].object === 'model', `the model's object is "model", got ${models[0].object}`);
  log(`model ${model}`);

  // completions, non-streaming
  const params = { model, prompt: 'The quick brown fox', max_tokens: MAX_TOKENS, temperature: 0, seed: 7 };
  const c = await client.completions.create(params);
  check(c.object === 'text_completion', `object is text_completion, got ${c.object}`);
  check(c.model === model, `the completion names the model (${c.model})`);
  check(Array.isArray(c.choices) && c.choices.length === 1, 'one choice');
  const text = c.choices[0].text;
  check(typeof text === 'string', 'the text is a string');
  checkUsage(c.usage, 'completion');
  checkFinish(c.choices[0].finish_reason, c.usage, 'completion');
  log(`completion: ${JSON.stringify(text)} (${c.choices[0].finish_reason}, ${c.usage.completion_tokens} tokens)`);

  // completions, streaming: same text at temperature 0, usage in a last chunk without choices
  {
    const stream = await client.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
    let streamed = '';
    let usage = null;
    const finishes = [];
    let chunks = 0;
    for await (const chunk of stream) {
      ++chunks;
      check(chunk.object === 'text_completion', `stream chunk object is text_completion, got ${chunk.object}`);
      if (chunk.usage) usage = chunk.usage;
      if (chunk.choices.length === 0) {
        check(chunk.usage, 'a chunk without choices carries usage');
        continue;
      }
      check(usage === null, 'usage comes after the content chunks');
      streamed += chunk.choices[0].text;
      if (chunk.choices[0].finish_reason) finishes.push(chunk.choices[0].finish_reason);
    }
    check(chunks >= 2, `several chunks, got ${chunks}`);
    check(streamed === text, `the streamed text ${JSON.stringify(streamed)} equals ${JSON.stringify(text)}`);
    check(finishes.length === 1 && finishes[0] === c.choices[0].finish_reason,
      `one finish_reason, ${c.choices[0].finish_reason}, in the stream (got ${JSON.stringify(finishes)})`);
    check(usage !== null, 'usage arrives with stream_options.include_usage');
    checkUsage(usage, 'streamed completion');
    check(usage.completion_tokens === c.usage.completion_tokens && usage.prompt_tokens === c.usage.prompt_tokens,
      `streamed usage ${JSON.stringify(usage)} equals ${JSON.stringify(c.usage)}`);
    log(`streamed completion: ${chunks} chunks, same text and usage`);
  }

  // chat completions, non-streaming
  const chatParams = {
    model,
    messages: [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Say hello.' }],
    max_tokens: MAX_TOKENS,
    temperature: 0,
    seed: 7,
  };
  const chat = await client.chat.completions.create(chatParams);
  check(chat.object === 'chat.completion', `object is chat.completion, got ${chat.object}`);
  check(chat.choices.length === 1, 'one chat choice');
  const msg = chat.choices[0].message;
  check(msg.role === 'assistant', `the message's role is assistant, got ${msg.role}`);
  check(typeof msg.content === 'string', 'the message content is a string');
  checkUsage(chat.usage, 'chat');
  checkFinish(chat.choices[0].finish_reason, chat.usage, 'chat');
  log(`chat: ${JSON.stringify(msg.content)} (${chat.choices[0].finish_reason})`);

  // chat completions, streaming
  {
    const stream = await client.chat.completions.create({ ...chatParams, stream: true, stream_options: { include_usage: true } });
    let streamed = '';
    let usage = null;
    const finishes = [];
    for await (const chunk of stream) {
      check(chunk.object === 'chat.completion.chunk', `chunk object is chat.completion.chunk, got ${chunk.object}`);
      if (chunk.usage) usage = chunk.usage;
      if (chunk.choices.length === 0) continue;
      const delta = chunk.choices[0].delta;
      check(delta !== undefined, 'every chat chunk with a choice has a delta');
      if (delta.role !== undefined) check(delta.role === 'assistant', `delta role is assistant, got ${delta.role}`);
      if (typeof delta.content === 'string') streamed += delta.content;
      if (chunk.choices[0].finish_reason) finishes.push(chunk.choices[0].finish_reason);
    }
    check(streamed === msg.content, `the streamed chat ${JSON.stringify(streamed)} equals ${JSON.stringify(msg.content)}`);
    check(finishes.length === 1 && finishes[0] === chat.choices[0].finish_reason,
      `one finish_reason, ${chat.choices[0].finish_reason}, in the chat stream (got ${JSON.stringify(finishes)})`);
    check(usage !== null, 'chat usage arrives with stream_options.include_usage');
    check(usage.completion_tokens === chat.usage.completion_tokens && usage.prompt_tokens === chat.usage.prompt_tokens,
      `streamed chat usage ${JSON.stringify(usage)} equals ${JSON.stringify(chat.usage)}`);
    log('streamed chat: same text and usage');
  }

  // errors
  await expectError(mod, 404, () => client.completions.create({ ...params, model: 'no-such-model' }), 'unknown model');
  await expectError(mod, 404, () => client.chat.completions.create({ ...chatParams, model: 'no-such-model' }),
    'unknown model (chat)');
  await expectError(mod, 400, () => client.completions.create({ ...params, max_tokens: -1 }), 'max_tokens -1');
  log('errors: 404 for an unknown model, 400 for max_tokens -1');

  // The server still works after the errors, and exports its metrics.
  const again = await client.completions.create(params);
  check(again.choices[0].text === text, 'the same request after the errors gives the same text');
  const metrics = await fetch(`${base}/metrics`);
  check(metrics.status === 200, `GET /metrics answers 200, got ${metrics.status}`);
  const body = await metrics.text();
  check(/^# TYPE \S+ (counter|gauge|histogram)$/m.test(body), 'GET /metrics is Prometheus text');
}

async function main() {
  let opts;
  try {
    opts = parseArgs(process.argv.slice(2));
  } catch (e) {
    console.error(`openai_client_test: ${e.message}`);
    return 1;
  }
  const mod = loadOpenAI();
  if (!mod) {
    console.log('openai_client_test: skipped: the openai package is not installed (run scripts/fetch-models.sh)');
    return SKIP;
  }
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const args = ['serve', ...(opts.model ? [opts.model] : []), '--host', '127.0.0.1', '--port', String(port)];
  const server = new Server(opts.tessera, args);
  const stopOnSignal = (sig) => {
    server.stop().then(() => process.exit(128 + (sig === 'SIGINT' ? 2 : 15)));
  };
  process.on('SIGINT', stopOnSignal);
  process.on('SIGTERM', stopOnSignal);
  let rc = 0;
  try {
    await server.waitHealthy(base, opts.startupTimeout);
    await runChecks(mod, base);
    console.log('openai_client_test: passed');
  } catch (e) {
    console.error(`openai_client_test: FAILED: ${e.message}`);
    if (!(e instanceof TestFailure) && e.stack) console.error(e.stack);
    rc = 1;
  } finally {
    await server.stop();
  }
  if (rc !== 0) {
    console.error(`--- output of ${opts.tessera} ${args.join(' ')} (${JSON.stringify(server.exited)}) ---`);
    console.error(server.output.slice(-20000));
  }
  return rc;
}

process.exitCode = await main();
