// Reference encodings for tests/llm/tokenizer_test.cc, by the npm packages' own encoders.
// Usage: node tokenizer_ref.mjs gpt2|llama <node_modules dir> <corpus.json> <out.json>
// corpus.json is a JSON array of strings; out.json gets one array of token ids per string.
//   gpt2:  gpt-3-encoder's encode(text) (no special tokens: <|endoftext|> is plain text).
//   llama: llama-tokenizer-js's encode(text, add_bos_token=false, add_preceding_space=true).
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [mode, nodeModules, corpusPath, outPath] = process.argv.slice(2);
const corpus = JSON.parse(readFileSync(corpusPath, 'utf8'));
let encode;
if (mode === 'gpt2') {
  const require = createRequire(join(nodeModules, 'x.js'));
  encode = require('gpt-3-encoder').encode;
} else if (mode === 'llama') {
  const url = pathToFileURL(join(nodeModules, 'llama-tokenizer-js', 'llama-tokenizer.js')).href;
  const { default: tokenizer } = await import(url);
  encode = (text) => tokenizer.encode(text, false, true);
} else {
  throw new Error(`unknown mode ${mode}`);
}
writeFileSync(outPath, JSON.stringify(corpus.map((text) => encode(text))));
