// Minimal .npy reader/writer (format 1.0-3.0, little-endian, C order) for the model tests.
import fs from 'node:fs';

// numpy descr <-> ONNX Runtime tensor type <-> typed array
const TYPES = [
  { descr: '<f4', ort: 'float32', Array: Float32Array },
  { descr: '<f8', ort: 'float64', Array: Float64Array },
  { descr: '|i1', ort: 'int8', Array: Int8Array },
  { descr: '|u1', ort: 'uint8', Array: Uint8Array },
  { descr: '<i2', ort: 'int16', Array: Int16Array },
  { descr: '<u2', ort: 'uint16', Array: Uint16Array },
  { descr: '<i4', ort: 'int32', Array: Int32Array },
  { descr: '<u4', ort: 'uint32', Array: Uint32Array },
  { descr: '<i8', ort: 'int64', Array: BigInt64Array },
  { descr: '<u8', ort: 'uint64', Array: BigUint64Array },
  { descr: '|b1', ort: 'bool', Array: Uint8Array },
];

export function typeForOrt(ortType) {
  const t = TYPES.find((x) => x.ort === ortType);
  if (!t) throw new Error(`npy: ONNX Runtime type '${ortType}' has no .npy mapping`);
  return t;
}

// Serializes {dtype (ORT name), dims, data (typed array)} as .npy bytes.
export function serializeNpy(dtype, dims, data) {
  const t = typeForOrt(dtype);
  const shape = dims.length === 1 ? `(${dims[0]},)` : `(${dims.join(', ')})`;
  let header = `{'descr': '${t.descr}', 'fortran_order': False, 'shape': ${shape}, }`;
  const total = 10 + header.length + 1;
  header += ' '.repeat((64 - (total % 64)) % 64) + '\n';
  const pre = Buffer.alloc(10);
  pre.write('\x93NUMPY', 0, 'latin1');
  pre[6] = 1;
  pre[7] = 0;
  pre.writeUInt16LE(header.length, 8);
  const body = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  return Buffer.concat([pre, Buffer.from(header, 'latin1'), body]);
}

export function writeNpy(path, dtype, dims, data) {
  fs.writeFileSync(path, serializeNpy(dtype, dims, data));
}

// Returns {dtype (ORT name), dims, data (typed array, own copy)}.
export function parseNpy(buf, what = '.npy') {
  if (buf.length < 10 || buf.toString('latin1', 0, 6) !== '\x93NUMPY') throw new Error(`${what}: not an .npy file`);
  const major = buf[6];
  let headerLen, offset;
  if (major === 1) {
    headerLen = buf.readUInt16LE(8);
    offset = 10;
  } else if (major === 2 || major === 3) {
    headerLen = buf.readUInt32LE(8);
    offset = 12;
  } else {
    throw new Error(`${what}: unsupported .npy version ${major}`);
  }
  const header = buf.toString('latin1', offset, offset + headerLen);
  const descr = /'descr'\s*:\s*'([^']+)'/.exec(header)?.[1];
  const fortran = /'fortran_order'\s*:\s*(True|False)/.exec(header)?.[1];
  const shape = /'shape'\s*:\s*\(([^)]*)\)/.exec(header)?.[1];
  if (!descr || !fortran || shape === undefined) throw new Error(`${what}: malformed .npy header: ${header}`);
  if (fortran === 'True') throw new Error(`${what}: Fortran-order arrays are not supported`);
  const t = TYPES.find((x) => x.descr === descr || (descr[0] === '=' && x.descr.slice(1) === descr.slice(1)));
  if (!t) throw new Error(`${what}: unsupported .npy dtype '${descr}'`);
  const dims = shape.split(',').map((s) => s.trim()).filter((s) => s.length).map(Number);
  const n = dims.reduce((a, b) => a * b, 1);
  const start = offset + headerLen;
  const bytes = n * t.Array.BYTES_PER_ELEMENT;
  if (buf.length - start < bytes) throw new Error(`${what}: .npy data is truncated`);
  const copy = new ArrayBuffer(bytes);
  new Uint8Array(copy).set(buf.subarray(start, start + bytes));
  return { dtype: t.ort, dims, data: new t.Array(copy) };
}

export function readNpy(path) {
  return parseNpy(fs.readFileSync(path), path);
}

// The file name tessera gives an output: its name with '/' replaced by '_', plus .npy.
export function outputFileName(name) {
  return name.replaceAll('/', '_') + '.npy';
}
