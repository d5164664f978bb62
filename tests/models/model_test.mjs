#!/usr/bin/env node
// End-to-end model test: runs MODEL through ONNX Runtime (CPU) and through `tessera run` on the same
// deterministic input and compares every output (see compare.mjs for the exact tolerance).
//
//   node tests/models/model_test.mjs --tessera BUILD/tessera --model models/M.onnx --shape 1x3x640x640
//        [--seed 1] [--input-kind text|noise] [--threads 1] [--work-dir DIR] [--rtol 1e-4] [--atol 1e-5]
//        [--backend NAME] [--against ort|ref]
//
// --backend runs tessera with `--backend NAME`; --against ref takes the expected outputs from
// tessera's reference backend instead of ONNX Runtime (then ONNX Runtime is not needed).
// The input is deterministic (ort_run.mjs makeInput): by default a synthetic page of glyph-like
// strokes normalized to [-1, 1], so that the OCR models' outputs span their full range.
// The input name comes from `tessera info --json` (and must match ONNX Runtime's); --shape gives the
// dims of the model's only input (use --input NAME=DIMS, repeatable, for several inputs).
// Exit status: 0 all outputs match, 1 mismatch or error, 77 skipped (model or ONNX Runtime not
// fetched: run scripts/fetch-models.sh).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { readNpy, writeNpy, outputFileName } from './npy.mjs';
import { loadOrt, makeInput, parseDims, runOrt } from './ort_run.mjs';
import { compareTensors, formatResult, DEFAULT_RTOL, DEFAULT_ATOL } from './compare.mjs';

const SKIP = 77;

function parseArgs(argv) {
  const o = { seed: 1, inputKind: 'text', threads: 1, rtol: DEFAULT_RTOL, atol: DEFAULT_ATOL, inputs: [],
    backend: 'ref', against: 'ort' };
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    const v = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    switch (a) {
      case '--tessera': o.tessera = v(); break;
      case '--model': o.model = v(); break;
      case '--shape': o.shape = v(); break;
      case '--input': o.inputs.push(v()); break;
      case '--seed': o.seed = Number(v()); break;
      case '--threads': o.threads = Number(v()); break;
      case '--input-kind': o.inputKind = v(); break;
      case '--work-dir': o.workDir = v(); break;
      case '--rtol': o.rtol = Number(v()); break;
      case '--atol': o.atol = Number(v()); break;
      case '--backend': o.backend = v(); break;
      case '--against': o.against = v(); break;
      default: throw new Error(`unknown argument '${a}'`);
    }
  }
  if (o.against !== 'ort' && o.against !== 'ref') throw new Error('--against expects ort or ref');
  if (!o.tessera || !o.model) throw new Error('--tessera and --model are required');
  if (!o.shape && !o.inputs.length) throw new Error('give --shape DIMS or --input NAME=DIMS');
  if (!Number.isInteger(o.seed) || o.seed < 0) throw new Error('--seed expects an integer >= 0');
  if (!Number.isInteger(o.threads) || o.threads < 1) throw new Error('--threads expects an integer >= 1');
  if (!(o.rtol >= 0) || !(o.atol >= 0)) throw new Error('--rtol/--atol expect numbers >= 0');
  return o;
}

function runTessera(tessera, args) {
  const r = spawnSync(tessera, args, { encoding: 'utf8', maxBuffer: 64 << 20 });
  if (r.error) throw new Error(`cannot run ${tessera}: ${r.error.message}`);
  if (r.status !== 0) {
    throw new Error(`\`tessera ${args.join(' ')}\` exited with ${r.status ?? r.signal}:\n${r.stderr}${r.stdout}`);
  }
  try {
    return JSON.parse(r.stdout);
  } catch (e) {
    throw new Error(`\`tessera ${args.join(' ')}\` printed no JSON: ${e.message}\n${r.stdout}`);
  }
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const modelName = path.basename(o.model, '.onnx');
  if (!fs.existsSync(o.model)) {
    console.log(`SKIP ${modelName}: ${o.model} not found (run scripts/fetch-models.sh or make models)`);
    return SKIP;
  }
  if (o.against === 'ort') {
    try {
      loadOrt();
    } catch (e) {
      console.log(`SKIP ${modelName}: ${e.message}`);
      return SKIP;
    }
  }
  const workDir = o.workDir ?? fs.mkdtempSync(path.join(os.tmpdir(), `tessera-${modelName}-`));
  const inputDir = path.join(workDir, 'inputs'), ortDir = path.join(workDir, 'ort');
  const tesseraDir = path.join(workDir, 'tessera');
  for (const d of [inputDir, ortDir, tesseraDir]) {
    fs.rmSync(d, { recursive: true, force: true });
    fs.mkdirSync(d, { recursive: true });
  }

  // Input names from tessera's importer.
  const info = runTessera(o.tessera, ['info', '--json', o.model]);
  const inputNames = (info.inputs ?? []).map((x) => x.name);
  const dimsByName = {};
  if (o.shape) {
    if (inputNames.length !== 1) {
      throw new Error(`--shape needs a model with one input; ${o.model} has [${inputNames}] (use --input NAME=DIMS)`);
    }
    dimsByName[inputNames[0]] = parseDims(o.shape);
  }
  for (const spec of o.inputs) {
    const eq = spec.indexOf('=');
    if (eq <= 0) throw new Error(`--input expects NAME=DIMS, got '${spec}'`);
    dimsByName[spec.slice(0, eq)] = parseDims(spec.slice(eq + 1));
  }
  const inputs = {};
  const tesseraArgs = ['run', o.model, '--json', '--threads', String(o.threads), '--warmup', '0', '--repeat', '1',
    '--output-dir', tesseraDir, '--backend', o.backend];
  inputNames.forEach((name, index) => {
    if (!dimsByName[name]) throw new Error(`no shape given for input '${name}'`);
    inputs[name] = makeInput(dimsByName[name], o.seed + index, o.inputKind);
    const file = path.join(inputDir, outputFileName(name));
    writeNpy(file, 'float32', inputs[name].dims, inputs[name].data);
    tesseraArgs.push('--input', `${name}=${file}`);
  });
  for (const name of Object.keys(dimsByName)) {
    if (!inputNames.includes(name)) throw new Error(`the model has no input named '${name}' (inputs: [${inputNames}])`);
  }

  // The expected outputs: ONNX Runtime's, or tessera's reference backend's (--against ref).
  const t0 = performance.now();
  let ort;
  if (o.against === 'ort') {
    ort = await runOrt(o.model, inputs, { threads: o.threads });
    if (ort.inputNames.join(',') !== inputNames.join(',')) {
      throw new Error(`input names differ: tessera [${inputNames}], onnxruntime [${ort.inputNames}]`);
    }
  } else {
    const refArgs = tesseraArgs.map((a) => (a === tesseraDir ? ortDir : a === o.backend ? 'ref' : a));
    const refRun = runTessera(o.tessera, refArgs);
    ort = { ortVersion: 'tessera ref', outputs: {} };
    for (const name of Object.keys(refRun.outputs ?? {})) {
      ort.outputs[name] = readNpy(path.join(ortDir, outputFileName(name)));
    }
  }
  const ortMs = performance.now() - t0;
  if (o.against === 'ort') {
    for (const [name, t] of Object.entries(ort.outputs)) writeNpy(path.join(ortDir, outputFileName(name)), t.dtype, t.dims, t.data);
  }

  const t1 = performance.now();
  const run = runTessera(o.tessera, tesseraArgs);
  const tesseraMs = performance.now() - t1;

  const expectedName = o.against === 'ort' ? `onnxruntime ${ort.ortVersion}` : 'tessera --backend ref';
  console.log(`model ${o.model} (expected: ${expectedName}; tessera --backend ${o.backend}, ${o.threads} thread(s), ` +
    `${o.inputKind} input, seed ${o.seed})`);
  for (const [n, t] of Object.entries(inputs)) console.log(`  input  ${n} float32 [${t.dims.join(', ')}]`);
  console.log(`  expected ${ortMs.toFixed(0)} ms (with session creation), tessera ${tesseraMs.toFixed(0)} ms ` +
    `(process; run ${run.latency_ms?.min?.toFixed(0)} ms; steps ${JSON.stringify(run.steps_per_backend)})`);

  const ortNames = Object.keys(ort.outputs).sort(), tesseraNames = Object.keys(run.outputs ?? {}).sort();
  let failures = 0;
  if (ortNames.join(',') !== tesseraNames.join(',')) {
    console.log(`FAIL output names differ: tessera [${tesseraNames}], expected [${ortNames}]`);
    ++failures;
  }
  const summary = { model: modelName, ort_version: ort.ortVersion, rtol: o.rtol, atol: o.atol, outputs: {} };
  for (const name of ortNames) {
    const expected = ort.outputs[name];
    const file = path.join(tesseraDir, outputFileName(name));
    let r;
    if (!fs.existsSync(file)) {
      r = { ok: false, reason: `tessera wrote no ${file}` };
    } else {
      r = compareTensors(readNpy(file), expected, { rtol: o.rtol, atol: o.atol });
    }
    console.log(`  output ${name} ${expected.dtype} [${expected.dims.join(', ')}]`);
    console.log(`  ${formatResult(name, r)}`);
    const { ok, reason, max_abs_diff, max_abs_expected, rel_max_diff, worst_element_ratio, violations } = r;
    summary.outputs[name] = { shape: expected.dims, ok, reason, max_abs_diff, max_abs_expected, rel_max_diff,
      worst_element_ratio, violations };
    if (!r.ok) ++failures;
  }
  console.log(`RESULT ${JSON.stringify(summary)}`);
  console.log(failures ? `FAIL ${modelName}: ${failures} output(s) differ (files in ${workDir})` : `PASS ${modelName}`);
  return failures ? 1 : 0;
}

main().then((code) => process.exit(code), (e) => {
  console.error(`model_test: error: ${e.message}`);
  process.exit(1);
});
