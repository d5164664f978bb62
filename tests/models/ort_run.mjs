#!/usr/bin/env node
// Runs an ONNX model with ONNX Runtime (CPU) on deterministic or given inputs.
//
//   node tests/models/ort_run.mjs --model M.onnx --input x=1x3x640x640 [--input y=FILE.npy]
//        [--seed 0] [--input-kind text|noise] [--threads 1] [--save-inputs DIR] [--output-dir DIR]
//        [--warmup 1] [--repeat 1] [--json]
//
// --input NAME=DIMS makes a deterministic float32 tensor from a seeded PRNG, in [-1, 1] (an image
// normalized with mean 0.5 / std 0.5): by default a synthetic page of glyph-like strokes for 4-D
// NCHW inputs (--input-kind text), or uniform noise (--input-kind noise, and for other ranks);
// the i-th generated input uses seed + i. NAME=FILE.npy reads one. --save-inputs writes the
// generated inputs as DIR/NAME.npy (to feed the same tensors to tessera), --output-dir writes each
// output as DIR/<output name>.npy ('/' replaced by '_', as `tessera run --output-dir` does).
// With --repeat N the session runs `warmup` untimed times, then N timed times; --json prints
// {model, threads, ort_version, latency_ms: {min, median, all}, inputs, outputs}.
// ONNX Runtime is loaded from $TESSERA_ORT_PREFIX or <repo>/.cache/node (scripts/fetch-models.sh).
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { readNpy, writeNpy, outputFileName } from './npy.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const REPO_ROOT = path.resolve(HERE, '..', '..');

export function ortPrefix() {
  return process.env.TESSERA_ORT_PREFIX || path.join(REPO_ROOT, '.cache', 'node');
}

// Loads onnxruntime-node; throws with a hint when scripts/fetch-models.sh has not been run.
export function loadOrt() {
  const prefix = ortPrefix();
  const req = createRequire(path.join(prefix, 'node_modules', 'noop.js'));
  try {
    return req('onnxruntime-node');
  } catch (e) {
    throw new Error(`cannot load onnxruntime-node from ${prefix} (run scripts/fetch-models.sh / ` +
      `make models): ${e.message}`);
  }
}

// mulberry32: a small, well-mixed 32-bit PRNG; same seed -> same stream on every machine.
function mulberry32(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// Deterministic float32 tensor, uniform in [lo, hi).
export function makeNoiseInput(dims, seed, lo = -1, hi = 1) {
  const n = dims.reduce((a, b) => a * b, 1);
  const data = new Float32Array(n);
  const next = mulberry32(seed);
  for (let i = 0; i < n; ++i) data[i] = lo + (hi - lo) * next();
  return { dtype: 'float32', dims, data };
}

// Deterministic synthetic "document" image, NCHW, normalized as (pixel - 0.5) / 0.5 to [-1, 1]:
// a light, slightly noisy background with dark lines of glyph-like strokes, so that OCR models see
// something text-like (their outputs then span their full range rather than sitting near 0).
// Falls back to makeNoiseInput for tensors that are not 4-D images.
export function makeTextImageInput(dims, seed) {
  if (dims.length !== 4 || dims[2] < 8 || dims[3] < 8) return makeNoiseInput(dims, seed);
  const [n, c, h, w] = dims;
  const next = mulberry32(seed);
  const data = new Float32Array(n * c * h * w);
  const gray = new Float32Array(h * w);
  for (let b = 0; b < n; ++b) {
    for (let i = 0; i < h * w; ++i) gray[i] = 0.85 + 0.1 * next();
    const lineHeight = Math.max(8, Math.min(32, Math.floor(h * 0.6)));
    for (let top = Math.floor(h * 0.1); top + lineHeight <= h; top += Math.floor(lineHeight * (1.6 + next()))) {
      const ink = 0.05 + 0.2 * next();
      let x = Math.floor(w * 0.05 * next()) + 2;
      const end = w - 2 - Math.floor(w * 0.3 * next());
      while (x < end) {
        const cw = Math.floor(lineHeight * (0.5 + 0.4 * next()));
        const thick = Math.max(1, Math.round(lineHeight / 8));
        const strokes = 2 + Math.floor(3 * next());
        for (let s = 0; s < strokes; ++s) {
          const horizontal = next() < 0.5;
          const y0 = top + Math.floor(next() * (lineHeight - thick));
          const x0 = x + Math.floor(next() * Math.max(1, cw - thick));
          const y1 = horizontal ? y0 + thick : top + lineHeight;
          const x1 = horizontal ? x + cw : x0 + thick;
          for (let y = horizontal ? y0 : top; y < Math.min(y1, h); ++y) {
            for (let xx = horizontal ? x : x0; xx < Math.min(x1, w); ++xx) gray[y * w + xx] = ink;
          }
        }
        x += cw + Math.floor(lineHeight * (0.1 + 0.3 * next())) + (next() < 0.15 ? lineHeight : 0);
      }
    }
    for (let ch = 0; ch < c; ++ch) {
      const tint = 0.03 * (next() - 0.5);
      const base = (b * c + ch) * h * w;
      for (let i = 0; i < h * w; ++i) data[base + i] = (Math.min(1, Math.max(0, gray[i] + tint)) - 0.5) / 0.5;
    }
  }
  return { dtype: 'float32', dims, data };
}

export const INPUT_KINDS = { text: makeTextImageInput, noise: makeNoiseInput };

export function makeInput(dims, seed, kind = 'text') {
  const make = INPUT_KINDS[kind];
  if (!make) throw new Error(`unknown input kind '${kind}' (${Object.keys(INPUT_KINDS).join(', ')})`);
  return make(dims, seed);
}

export function parseDims(s) {
  const dims = s.split('x').map((d) => Number(d));
  if (!dims.length || dims.some((d) => !Number.isInteger(d) || d < 0)) {
    throw new Error(`bad shape '${s}' (expected e.g. 1x3x640x640)`);
  }
  return dims;
}

// Runs `modelPath` on `inputs` ({name: {dtype, dims, data}}); returns
// {outputs: {name: {dtype, dims, data}}, timesMs: [...]} (timesMs has `repeat` entries).
export async function runOrt(modelPath, inputs, { threads = 1, warmup = 0, repeat = 1 } = {}) {
  const ort = loadOrt();
  const session = await ort.InferenceSession.create(modelPath, {
    executionProviders: ['cpu'],
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
  });
  const feeds = {};
  for (const [name, t] of Object.entries(inputs)) feeds[name] = new ort.Tensor(t.dtype, t.data, t.dims);
  for (const name of session.inputNames) {
    if (!(name in feeds)) throw new Error(`${modelPath}: no value given for input '${name}'`);
  }
  let result;
  const timesMs = [];
  for (let i = 0; i < warmup + repeat; ++i) {
    const t0 = performance.now();
    result = await session.run(feeds);
    const t1 = performance.now();
    if (i >= warmup) timesMs.push(t1 - t0);
  }
  const outputs = {};
  for (const name of session.outputNames) {
    const t = result[name];
    outputs[name] = { dtype: t.type, dims: Array.from(t.dims, Number), data: t.data };
  }
  await session.release();
  return { outputs, timesMs, inputNames: session.inputNames, ortVersion: ort.env.versions?.node ?? '?' };
}

export function summarizeTimes(timesMs) {
  const sorted = [...timesMs].sort((a, b) => a - b);
  return { min: sorted[0], median: sorted[Math.floor(sorted.length / 2)], all: timesMs };
}

function parseArgs(argv) {
  const o = { inputs: [], seed: 0, inputKind: 'text', threads: 1, warmup: 0, repeat: 1, json: false };
  const need = (i) => {
    if (i + 1 >= argv.length) throw new Error(`${argv[i]} needs a value`);
    return argv[i + 1];
  };
  const int = (s, flag, min) => {
    const v = Number(s);
    if (!Number.isInteger(v) || v < min) throw new Error(`${flag} expects an integer >= ${min}, got '${s}'`);
    return v;
  };
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    switch (a) {
      case '--model': o.model = need(i); ++i; break;
      case '--input': o.inputs.push(need(i)); ++i; break;
      case '--seed': o.seed = int(need(i), a, 0); ++i; break;
      case '--threads': o.threads = int(need(i), a, 1); ++i; break;
      case '--input-kind': o.inputKind = need(i); ++i; break;
      case '--warmup': o.warmup = int(need(i), a, 0); ++i; break;
      case '--repeat': o.repeat = int(need(i), a, 1); ++i; break;
      case '--save-inputs': o.saveInputs = need(i); ++i; break;
      case '--output-dir': o.outputDir = need(i); ++i; break;
      case '--json': o.json = true; break;
      case '-h': case '--help':
        console.log(fs.readFileSync(fileURLToPath(import.meta.url), 'utf8').split('\n').slice(1)
          .filter((l, i, all) => all.slice(0, i + 1).every((x) => x.startsWith('//')))
          .map((l) => l.replace(/^\/\/ ?/, '')).join('\n'));
        process.exit(0);
        break;
      default: throw new Error(`unknown argument '${a}' (see --help)`);
    }
  }
  if (!o.model) throw new Error('--model is required');
  return o;
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const inputs = {};
  o.inputs.forEach((spec, index) => {
    const eq = spec.indexOf('=');
    if (eq <= 0 || eq + 1 === spec.length) throw new Error(`--input expects NAME=DIMS or NAME=FILE.npy, got '${spec}'`);
    const name = spec.slice(0, eq), value = spec.slice(eq + 1);
    inputs[name] = value.endsWith('.npy') ? readNpy(value) : makeInput(parseDims(value), o.seed + index, o.inputKind);
  });
  if (o.saveInputs) {
    fs.mkdirSync(o.saveInputs, { recursive: true });
    for (const [name, t] of Object.entries(inputs)) {
      writeNpy(path.join(o.saveInputs, outputFileName(name)), t.dtype, t.dims, t.data);
    }
  }
  const r = await runOrt(o.model, inputs, o);
  if (o.outputDir) {
    fs.mkdirSync(o.outputDir, { recursive: true });
    for (const [name, t] of Object.entries(r.outputs)) {
      writeNpy(path.join(o.outputDir, outputFileName(name)), t.dtype, t.dims, t.data);
    }
  }
  const summary = {
    model: o.model,
    engine: 'onnxruntime-node',
    ort_version: r.ortVersion,
    threads: o.threads,
    warmup: o.warmup,
    repeat: o.repeat,
    latency_ms: summarizeTimes(r.timesMs),
    inputs: Object.fromEntries(Object.entries(inputs).map(([n, t]) => [n, { dtype: t.dtype, shape: t.dims }])),
    outputs: Object.fromEntries(Object.entries(r.outputs).map(([n, t]) => [n, { dtype: t.dtype, shape: t.dims }])),
  };
  if (o.json) {
    console.log(JSON.stringify(summary, null, 2));
  } else {
    for (const [n, t] of Object.entries(summary.outputs)) console.log(`${n}  ${t.dtype}  [${t.shape.join(', ')}]`);
    const l = summary.latency_ms;
    console.log(`latency: min ${l.min.toFixed(3)} ms, median ${l.median.toFixed(3)} ms over ${o.repeat} run(s), ` +
      `${o.threads} thread(s), onnxruntime ${r.ortVersion}`);
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((e) => {
    console.error(`ort_run: error: ${e.message}`);
    process.exit(1);
  });
}
