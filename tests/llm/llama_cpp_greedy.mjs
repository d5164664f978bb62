#!/usr/bin/env node
// llama.cpp's greedy continuation of a prompt on a GGUF file, as JSON, through node-llama-cpp's
// prebuilt CPU binary (scripts/fetch-llama-cpp.sh installs it into .cache/node-llama-cpp):
//
//   node tests/llm/llama_cpp_greedy.mjs --model FILE.gguf --prompt TEXT [--max-tokens 32]
//        [--threads 2] [--ignore-eos] [--top K] [--info] [--vocab-only] [--node-prefix DIR]
//
// prints {"prompt_ids": [...], "output_ids": [...], "text": "...", "stopped_at_eos": bool, ...}.
// The prompt ids come from llama.cpp's own tokenizer for the file (no parsing of special-token
// text), with BOS prepended when the file asks for it (tokenizer.ggml.add_bos_token, whose
// default for the llama/SentencePiece vocabulary is true): the way llama.cpp's tools do.
// Sampling is greedy (temperature 0: llama.cpp's greedy sampler alone, no repeat penalty).
// Generation stops after an end-of-generation token (which is included in output_ids) unless
// --ignore-eos. --top K adds, per generated token, llama.cpp's K most probable ids and their
// probabilities ("top"), to judge whether a divergence from another engine is a near-tie.
// --info adds the file's metadata (arrays shortened) as "metadata". --vocab-only loads only the
// vocabulary (a vocabulary-only GGUF such as llama.cpp's models/ggml-vocab-llama-spm.gguf works)
// and only tokenizes (output_ids is empty).
// Exit codes: 0 success, 2 usage error, 3 node-llama-cpp not installed, 1 any other failure.
import fs from "node:fs";
import path from "node:path";
import {fileURLToPath, pathToFileURL} from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "..", "..");

function usage(msg) {
  if (msg) process.stderr.write(`llama_cpp_greedy: ${msg}\n`);
  process.stderr.write(
      "usage: llama_cpp_greedy.mjs --model FILE.gguf --prompt TEXT [--max-tokens N] [--threads N]\n" +
      "                            [--ignore-eos] [--top K] [--info] [--vocab-only] [--node-prefix DIR]\n");
  process.exit(2);
}

const opts = {model: null, prompt: null, maxTokens: 32, threads: 2, ignoreEos: false, top: 0, info: false, vocabOnly: false,
              prefix: process.env.NODE_LLAMA_CPP_PREFIX || path.join(root, ".cache", "node-llama-cpp")};
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  const next = () => {
    if (i + 1 >= argv.length) usage(`${a} needs a value`);
    return argv[++i];
  };
  const int = (v, name) => {
    if (!/^\d+$/.test(v)) usage(`${name} must be a non-negative integer, got '${v}'`);
    return Number(v);
  };
  switch (a) {
    case "--model": opts.model = next(); break;
    case "--prompt": opts.prompt = next(); break;
    case "--max-tokens": opts.maxTokens = int(next(), a); break;
    case "--threads": opts.threads = int(next(), a); break;
    case "--top": opts.top = int(next(), a); break;
    case "--ignore-eos": opts.ignoreEos = true; break;
    case "--info": opts.info = true; break;
    case "--vocab-only": opts.vocabOnly = true; break;
    case "--node-prefix": opts.prefix = next(); break;
    case "-h": case "--help": usage();
    default: usage(`unknown argument '${a}'`);
  }
}
if (!opts.model) usage("--model is required");
if (opts.prompt === null) usage("--prompt is required");
if (!fs.existsSync(opts.model)) usage(`model file '${opts.model}' does not exist`);

// node-llama-cpp is ESM-only and lives in its own npm prefix: import it by file URL.
const pkgDir = path.join(opts.prefix, "node_modules", "node-llama-cpp");
const pkgJson = path.join(pkgDir, "package.json");
if (!fs.existsSync(pkgJson)) {
  process.stderr.write(`llama_cpp_greedy: node-llama-cpp is not installed in ${opts.prefix}` +
                       " (run scripts/fetch-llama-cpp.sh)\n");
  process.exit(3);
}
const entry = JSON.parse(fs.readFileSync(pkgJson, "utf8")).exports["."].import;
// Never download or build llama.cpp: only the prebuilt CPU binary.
process.env.NODE_LLAMA_CPP_SKIP_DOWNLOAD ??= "true";
const {getLlama, LlamaLogLevel} = await import(pathToFileURL(path.join(pkgDir, entry)).href);

const llama = await getLlama({gpu: false, build: "never", usePrebuiltBinaries: true, skipDownload: true,
                              progressLogs: false, logLevel: LlamaLogLevel.error});
try {
  const model = await llama.loadModel({modelPath: path.resolve(opts.model), gpuLayers: 0, vocabOnly: opts.vocabOnly});
  const tokens = model.tokens;
  const promptIds = [];
  if (tokens.shouldPrependBosToken && tokens.bos != null) promptIds.push(tokens.bos);
  promptIds.push(...model.tokenize(opts.prompt, false));

  if (opts.vocabOnly) opts.maxTokens = 0;
  // No context (no KV cache, no compute) when only tokenizing.
  let context = null;
  if (opts.maxTokens > 0) {
    const need = promptIds.length + opts.maxTokens + 1;
    const contextSize = Math.max(need, Math.min(model.trainContextSize ?? need, 256));
    context = await model.createContext({contextSize, batchSize: Math.min(512, contextSize),
                                         threads: {ideal: opts.threads, min: opts.threads}, sequences: 1});
  }
  const outputIds = [];
  const top = [];
  let stoppedAtEos = false;
  const t0 = performance.now();
  let tFirst = null;
  if (opts.maxTokens > 0) {
    const metadata = opts.top > 0 ? {probabilities: true} : {};
    for await (const out of context.getSequence().evaluateWithMetadata(promptIds, metadata, {temperature: 0, yieldEogToken: true})) {
      if (tFirst === null) tFirst = performance.now();
      outputIds.push(out.token);
      if (opts.top > 0) {
        const sorted = [...out.probabilities.entries()].sort((a, b) => b[1] - a[1]).slice(0, opts.top);
        top.push(sorted.map(([id, p]) => [id, Number(p.toPrecision(6))]));
      }
      if (!opts.ignoreEos && model.isEogToken(out.token)) {
        stoppedAtEos = true;
        break;
      }
      if (outputIds.length >= opts.maxTokens) break;
    }
  }
  const t1 = performance.now();
  const result = {
    prompt_ids: promptIds,
    output_ids: outputIds,
    text: model.detokenize(outputIds),
    stopped_at_eos: stoppedAtEos,
    bos_id: tokens.bos,
    eos_id: tokens.eos,
    add_bos: tokens.shouldPrependBosToken,
    vocab_size: model.fileInfo.metadata?.tokenizer?.ggml?.tokens?.length ?? null,
    // llama.cpp's SentencePiece ("llama") tokenizer merges by these scores alone (0 when absent).
    tokenizer_model: model.fileInfo.metadata?.tokenizer?.ggml?.model ?? null,
    tokenizer_has_scores: Array.isArray(model.fileInfo.metadata?.tokenizer?.ggml?.scores),
    llama_cpp_release: llama.llamaCppRelease.release,
    threads: context ? context.currentThreads : null,
    // Through the JS binding (per-token overhead): a rough figure; llama-bench is the fair one.
    seconds_first_token: tFirst === null ? null : (tFirst - t0) / 1000,
    seconds_total: (t1 - t0) / 1000,
  };
  if (opts.top > 0) result.top = top;
  if (opts.info) {
    const shorten = (v) => Array.isArray(v) ? (v.length > 8 ? `[array of ${v.length}]` : v)
                         : (v && typeof v === "object") ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, shorten(x)]))
                         : typeof v === "bigint" ? Number(v) : v;
    result.metadata = shorten(model.fileInfo.metadata);
  }
  process.stdout.write(JSON.stringify(result) + "\n");
  await context?.dispose();
  await model.dispose();
} finally {
  await llama.dispose();
}
