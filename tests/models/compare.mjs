#!/usr/bin/env node
// Output comparison for the model tests: tessera's outputs (`actual`) against ONNX Runtime's
// (`expected`). An output passes when its dtype and shape match, no element is NaN/Inf in one
// and finite in the other, and both
//   max_i |a_i - b_i| / max_i |b_i|  <= rtol               (relative to the output's scale)
//   |a_i - b_i| <= rtol * |b_i| + atol    for every i       (element-wise)
// hold, with rtol = 1e-4 and atol = 1e-5 by default.
//
//   node tests/models/compare.mjs EXPECTED_DIR ACTUAL_DIR [--rtol R] [--atol A]
//       compares every EXPECTED_DIR/*.npy with ACTUAL_DIR/<same name>; exit 1 on mismatch.
//   node tests/models/compare.mjs --self-test
//       checks that the comparison accepts near-equal tensors and rejects real mismatches.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { readNpy } from './npy.mjs';

export const DEFAULT_RTOL = 1e-4;
export const DEFAULT_ATOL = 1e-5;

// Returns {ok, reason?, max_abs_diff, max_abs_expected, rel_max_diff, worst_element_ratio,
// worst_index, violations, numel}. worst_element_ratio is max_i |a-b| / (rtol*|b| + atol): <= 1
// passes the element-wise bound.
export function compareTensors(actual, expected, { rtol = DEFAULT_RTOL, atol = DEFAULT_ATOL } = {}) {
  const r = { ok: false, numel: expected.data.length };
  if (actual.dtype !== expected.dtype) return { ...r, reason: `dtype ${actual.dtype} != expected ${expected.dtype}` };
  if (actual.dims.length !== expected.dims.length || actual.dims.some((d, i) => d !== expected.dims[i])) {
    return { ...r, reason: `shape [${actual.dims}] != expected [${expected.dims}]` };
  }
  if (actual.data.length !== expected.data.length) return { ...r, reason: 'element counts differ' };
  const num = Number;  // also turns BigInt (int64) elements into numbers
  let maxAbsDiff = 0, maxAbsExpected = 0, worstRatio = 0, worstIndex = -1, violations = 0, nonFinite = 0;
  let firstNonFinite = -1;
  for (let i = 0; i < expected.data.length; ++i) {
    const a = num(actual.data[i]), b = num(expected.data[i]);
    if (!Number.isFinite(a) || !Number.isFinite(b)) {
      const same = Object.is(a, b) || (Number.isNaN(a) && Number.isNaN(b));
      if (!same) {
        ++nonFinite;
        if (firstNonFinite < 0) firstNonFinite = i;
      }
      continue;
    }
    const d = Math.abs(a - b);
    maxAbsDiff = Math.max(maxAbsDiff, d);
    maxAbsExpected = Math.max(maxAbsExpected, Math.abs(b));
    const ratio = d / (rtol * Math.abs(b) + atol);
    if (ratio > 1) ++violations;
    if (ratio > worstRatio) {
      worstRatio = ratio;
      worstIndex = i;
    }
  }
  const relMax = maxAbsDiff === 0 ? 0 : maxAbsDiff / maxAbsExpected;
  Object.assign(r, {
    max_abs_diff: maxAbsDiff,
    max_abs_expected: maxAbsExpected,
    rel_max_diff: relMax,
    worst_element_ratio: worstRatio,
    worst_index: worstIndex,
    worst_actual: worstIndex >= 0 ? num(actual.data[worstIndex]) : undefined,
    worst_expected: worstIndex >= 0 ? num(expected.data[worstIndex]) : undefined,
    violations,
  });
  if (nonFinite) {
    return { ...r, reason: `${nonFinite} element(s) NaN/Inf in one output but not the other (first at flat index ` +
      `${firstNonFinite}: got ${num(actual.data[firstNonFinite])}, expected ${num(expected.data[firstNonFinite])})` };
  }
  if (!(relMax <= rtol)) {
    return { ...r, reason: `max|a-b|/max|b| = ${relMax.toExponential(3)} > ${rtol}` };
  }
  if (violations) {
    return { ...r, reason: `${violations} element(s) break |a-b| <= ${rtol}*|b| + ${atol}; worst at flat index ` +
      `${worstIndex}: got ${r.worst_actual}, expected ${r.worst_expected}` };
  }
  return { ...r, ok: true };
}

export function formatResult(name, r) {
  const head = `${r.ok ? 'ok  ' : 'FAIL'} ${name}`;
  if (r.max_abs_diff === undefined) return `${head}: ${r.reason}`;
  const body = `max|a-b| ${r.max_abs_diff.toExponential(3)}, max|b| ${r.max_abs_expected.toExponential(3)}, ` +
    `max|a-b|/max|b| ${r.rel_max_diff.toExponential(3)}, worst |a-b|/(rtol|b|+atol) ${r.worst_element_ratio.toFixed(4)}`;
  return `${head}: ${body}${r.ok ? '' : `\n     ${r.reason}`}`;
}

function selfTest() {
  const t = (arr, dims = [arr.length]) => ({ dtype: 'float32', dims, data: Float32Array.from(arr) });
  const base = Array.from({ length: 1000 }, (_, i) => Math.sin(i) * 3);
  const cases = [
    ['identical', t(base), t(base), true],
    ['tiny relative noise (1e-6)', t(base.map((v) => v * (1 + 1e-6))), t(base), true],
    ['one element off by 1e-3 relative', t(base.map((v, i) => (i === 17 ? v * 1.001 + 0.01 : v))), t(base), false],
    ['small element off by 1e-4 absolute', t(base.map((v, i) => (i === 0 ? v + 1e-4 : v))), t(base), false],
    ['all scaled by 1.01', t(base.map((v) => v * 1.01)), t(base), false],
    ['NaN in actual', t(base.map((v, i) => (i === 5 ? NaN : v))), t(base), false],
    ['NaN in both', t([NaN, 1]), t([NaN, 1]), true],
    ['shape differs', t(base, [10, 100]), t(base, [100, 10]), false],
    ['rank differs', t(base, [1000]), t(base, [1, 1000]), false],
    ['dtype differs', { ...t(base), dtype: 'float64', data: Float64Array.from(base) }, t(base), false],
    ['all zeros', t([0, 0, 0]), t([0, 0, 0]), true],
    ['zeros vs small', t([0, 0, 1e-3]), t([0, 0, 0]), false],
  ];
  let failures = 0;
  for (const [name, a, b, want] of cases) {
    const r = compareTensors(a, b);
    const good = r.ok === want;
    if (!good) ++failures;
    console.log(`${good ? 'ok  ' : 'BAD '} ${name}: expected ${want ? 'accept' : 'reject'}, got ` +
      `${r.ok ? 'accept' : `reject (${r.reason})`}`);
  }
  if (failures) {
    console.error(`compare self-test: ${failures} case(s) wrong`);
    process.exit(1);
  }
  console.log('compare self-test: all cases right');
}

function compareDirs(expectedDir, actualDir, opts) {
  const files = fs.readdirSync(expectedDir).filter((f) => f.endsWith('.npy')).sort();
  if (!files.length) throw new Error(`no .npy files in ${expectedDir}`);
  let failures = 0;
  for (const f of files) {
    const actualPath = path.join(actualDir, f);
    if (!fs.existsSync(actualPath)) {
      console.log(`FAIL ${f}: missing in ${actualDir}`);
      ++failures;
      continue;
    }
    const r = compareTensors(readNpy(actualPath), readNpy(path.join(expectedDir, f)), opts);
    console.log(formatResult(f, r));
    if (!r.ok) ++failures;
  }
  return failures;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  if (args[0] === '--self-test') {
    selfTest();
  } else {
    const opts = {};
    const dirs = [];
    for (let i = 0; i < args.length; ++i) {
      if (args[i] === '--rtol') opts.rtol = Number(args[++i]);
      else if (args[i] === '--atol') opts.atol = Number(args[++i]);
      else dirs.push(args[i]);
    }
    if (dirs.length !== 2) {
      console.error('usage: compare.mjs EXPECTED_DIR ACTUAL_DIR [--rtol R] [--atol A] | --self-test');
      process.exit(2);
    }
    try {
      process.exit(compareDirs(dirs[0], dirs[1], opts) ? 1 : 0);
    } catch (e) {
      console.error(`compare: error: ${e.message}`);
      process.exit(2);
    }
  }
}
