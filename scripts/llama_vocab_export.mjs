// Writes the LLaMA (1/2) vocabulary that llama-tokenizer-js carries, as plain JSON tessera reads
// (load_llama_vocab_export in src/llm/tokenizer.h).
//
// The package holds exactly two things, base64-encoded in its source: the 32000 token texts
// (joined by "\n"; the line number is the id) and the merges, as pairs of 16-bit token ids whose
// order is their priority. It has no scores and no token types; the types written here follow
// the LLaMA vocabulary's layout that the package documents: 0 <unk>, 1 <s>, 2 </s>, then the
// byte tokens <0x00>..<0xFF>, then normal tokens.
//
// Usage: node scripts/llama_vocab_export.mjs <node_modules dir> <output.json>
import { writeFileSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [nodeModules, outPath] = process.argv.slice(2);
if (!nodeModules || !outPath) {
  console.error('usage: node llama_vocab_export.mjs <node_modules dir> <output.json>');
  process.exit(2);
}
const pkg = join(nodeModules, 'llama-tokenizer-js', 'llama-tokenizer.js');
const { default: tokenizer } = await import(pathToFileURL(pkg).href);

const tokens = tokenizer.vocabById;
if (tokens.length !== 32000) throw new Error(`expected 32000 tokens, got ${tokens.length}`);
if (new Set(tokens).size !== tokens.length) throw new Error('the vocabulary has duplicate tokens');
const check = (id, text) => {
  if (tokens[id] !== text) throw new Error(`token ${id} is ${JSON.stringify(tokens[id])}, expected ${text}`);
};
check(0, '<unk>');
check(1, '<s>');
check(2, '</s>');

// tokenizer.merges: Map "left right" -> priority (lower merges first).
const merges = [...tokenizer.merges.entries()].sort((a, b) => a[1] - b[1]).map(([pair]) => pair);
for (const m of merges) {
  if (m.split(' ').length !== 2) throw new Error(`merge ${JSON.stringify(m)} is not two tokens`);
}

const types = tokens.map((t, id) => {
  if (id === 0) return 2;  // unknown
  if (id === 1 || id === 2) return 3;  // control
  if (/^<0x[0-9A-F]{2}>$/.test(t)) return 6;  // byte
  return 1;  // normal
});

const out = {
  source: 'llama-tokenizer-js (LLaMA 1/2 vocabulary)',
  model: 'llama',
  tokens,
  types,
  merges,
  bos_id: 1,
  eos_id: 2,
  unk_id: 0,
  add_bos: true,
  add_space_prefix: true,
};
writeFileSync(outPath + '.part', JSON.stringify(out));
renameSync(outPath + '.part', outPath);
console.log(`wrote ${outPath}: ${tokens.length} tokens, ${merges.length} merges`);
