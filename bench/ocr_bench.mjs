#!/usr/bin/env node
// Runs the OCR models through `tessera run` and ONNX Runtime (tests/models/ort_run.mjs) on the same
// input and thread count; writes a JSON report and prints a table. Called by bench/run.sh.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { writeNpy } from '../tests/models/npy.mjs';
import { loadOrt, makeInput, parseDims, runOrt, summarizeTimes, REPO_ROOT } from '../tests/models/ort_run.mjs';

const MODELS = {
  det: { file: 'ch_PP-OCRv4_det_infer.onnx', shape: '1x3x640x640' },
  rec: { file: 'ch_PP-OCRv4_rec_infer.onnx', shape: '1x3x48x320' },
  cls: { file: 'ch_ppocr_mobile_v2.0_cls_infer.onnx', shape: '1x3x48x192' },
};

function parseArgs(argv) {
  const o = {};
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, '').replace(/-/g, '_');
    if (i + 1 >= argv.length) throw new Error(`${argv[i]} needs a value`);
    o[key] = argv[i + 1];
  }
  const ints = (s, min) => s.trim().split(/[\s,]+/).map((x) => {
    const v = Number(x);
    if (!Number.isInteger(v) || v < min) throw new Error(`expected integers >= ${min}, got '${s}'`);
    return v;
  });
  o.threads = ints(o.threads ?? '1 2', 1);
  [o.repeat] = ints(o.repeat ?? '5', 1);
  [o.warmup] = ints(o.warmup ?? '1', 0);
  o.models = (o.models ?? 'det rec cls').trim().split(/[\s,]+/);
  o.backends = (o.backends ?? 'ref').trim().split(/[\s,]+/);
  for (const m of o.models) if (!MODELS[m]) throw new Error(`unknown model '${m}' (det, rec, cls)`);
  if (!o.tessera) throw new Error('--tessera is required');
  o.results_dir ??= path.join(REPO_ROOT, 'bench', 'results');
  return o;
}

function tesseraJson(tessera, args) {
  const r = spawnSync(tessera, args, { encoding: 'utf8', maxBuffer: 64 << 20 });
  if (r.error) throw new Error(`cannot run ${tessera}: ${r.error.message}`);
  if (r.status !== 0) {
    throw new Error((r.stderr || r.stdout).trim().split('\n').slice(-3).join(' | ').replace(/^error: /, ''));
  }
  return JSON.parse(r.stdout);
}

function gitRevision() {
  const r = spawnSync('git', ['-C', REPO_ROOT, 'describe', '--always', '--dirty'], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : 'unknown';
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const ortVersion = loadOrt().env.versions?.node ?? '?';
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tessera-bench-'));
  const report = {
    benchmark: 'ocr',
    date: new Date().toISOString(),
    git: gitRevision(),
    host: { cpus: os.cpus().length, cpu_model: os.cpus()[0]?.model, loadavg: os.loadavg() },
    tessera_backends: o.backends,
    onnxruntime: ortVersion,
    warmup: o.warmup,
    repeat: o.repeat,
    statistic: 'median',
    results: [],
  };
  console.error(`bench: ${o.models.join(', ')} at ${o.threads.join(', ')} thread(s), warmup ${o.warmup}, ` +
    `median of ${o.repeat}; onnxruntime ${ortVersion}`);
  for (const key of o.models) {
    const m = MODELS[key];
    const model = path.join(REPO_ROOT, 'models', m.file);
    let inputName;
    try {
      inputName = tesseraJson(o.tessera, ['info', '--json', model]).inputs[0].name;
    } catch (e) {
      inputName = 'x';
      console.error(`bench: tessera info ${m.file}: ${e.message}`);
    }
    const input = makeInput(parseDims(m.shape), 1);
    const inputFile = path.join(tmp, `${key}.npy`);
    writeNpy(inputFile, input.dtype, input.dims, input.data);
    for (const threads of o.threads) {
      const row = { model: key, file: m.file, shape: m.shape, threads, tessera: {} };
      for (const backend of o.backends) {
        const r = {};
        try {
          const j = tesseraJson(o.tessera, ['run', model, '--input', `${inputName}=${inputFile}`, '--threads',
            String(threads), '--warmup', String(o.warmup), '--repeat', String(o.repeat), '--backend', backend, '--json']);
          r.ms = { min: j.latency_ms.min, median: j.latency_ms.median, all: j.latency_ms.all };
          r.steps = j.steps_per_backend;
          r.peak_intermediate_bytes = j.peak_intermediate_bytes;
        } catch (e) {
          r.error = e.message;
        }
        row.tessera[backend] = r;
      }
      const ort = await runOrt(model, { [inputName]: input }, { threads, warmup: o.warmup, repeat: o.repeat });
      row.ort_ms = summarizeTimes(ort.timesMs);
      for (const r of Object.values(row.tessera)) if (r.ms) r.ratio_to_ort = r.ms.median / row.ort_ms.median;
      report.results.push(row);
      const parts = Object.entries(row.tessera).map(([b, r]) => `${b} ${r.ms ? r.ms.median.toFixed(1) + ' ms' : 'error'}`);
      console.error(`bench: ${key} ${threads}t: ${parts.join(', ')}, onnxruntime ${row.ort_ms.median.toFixed(1)} ms`);
    }
  }
  fs.rmSync(tmp, { recursive: true, force: true });
  fs.mkdirSync(o.results_dir, { recursive: true });
  const stamp = report.date.replace(/[-:]/g, '').replace(/\..*/, '').replace('T', '-');
  const out = path.join(o.results_dir, `ocr-${stamp}.json`);
  fs.writeFileSync(out, JSON.stringify(report, null, 2) + '\n');

  const pad = (s, n) => String(s).padStart(n);
  console.log(`OCR latency, median of ${o.repeat} (ms): tessera backends vs onnxruntime ${ortVersion} CPU ` +
    '(x = backend/ORT)');
  console.log(`${'model'.padEnd(6)}${pad('input', 13)}${pad('threads', 9)}` +
    o.backends.map((b) => pad(b, 18)).join('') + pad('onnxruntime', 13));
  for (const r of report.results) {
    const cells = o.backends.map((b) => {
      const t = r.tessera[b];
      return pad(t.ms ? `${t.ms.median.toFixed(1)} (${t.ratio_to_ort.toFixed(2)}x)` : 'error', 18);
    });
    console.log(`${r.model.padEnd(6)}${pad(r.shape, 13)}${pad(r.threads, 9)}${cells.join('')}${pad(r.ort_ms.median.toFixed(1), 13)}`);
  }
  for (const r of report.results) {
    for (const [b, t] of Object.entries(r.tessera)) if (t.error) console.log(`${r.model} ${r.threads}t ${b} error: ${t.error}`);
  }
  console.log(`results: ${path.relative(process.cwd(), out) || out}`);
  return report.results.some((r) => Object.values(r.tessera).some((t) => t.error)) ? 1 : 0;
}

main().then((code) => process.exit(code), (e) => {
  console.error(`bench: error: ${e.message}`);
  process.exit(1);
});
