// Hugging Face's own tokenizer (the Rust `tokenizers` library through its Node binding, npm
// `tokenizers`) on a book, beside bm_tokenize's BM_tokenize/tokenizer_json_* on the same
// tokenizer.json files. One thread (RAYON_RS_NUM_CPUS=1; tokenizers parallelizes batches only).
// The npm package is installed outside the project, never a dependency:
//   (mkdir -p /tmp/hftok && cd /tmp/hftok && npm install tokenizers@0.23.2)
//   RAYON_RS_NUM_CPUS=1 NODE_PATH=/tmp/hftok/node_modules node bench/tokenize/tokenize_hf.mjs BOOK DIR...
// Prints, per tokenizer.json directory: tokens, and the median and minimum of 5 timed encodes
// (after one untimed) of the whole book with special tokens added, as bm_tokenize encodes it.
import { createRequire } from 'module';
import { readFileSync } from 'fs';
const require = createRequire(import.meta.url);
const { Tokenizer } = require('tokenizers');

const [book, ...dirs] = process.argv.slice(2);
const text = readFileSync(book, 'utf8');
for (const dir of dirs) {
  const tok = Tokenizer.fromFile(dir + '/tokenizer.json');
  let tokens = (await tok.encode(text)).getIds().length;
  const times = [];
  for (let i = 0; i < 5; ++i) {
    const t0 = process.hrtime.bigint();
    tokens = (await tok.encode(text)).getIds().length;
    times.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  times.sort((a, b) => a - b);
  const mb = Buffer.byteLength(text) / 1e6;
  console.log(`${dir}: ${tokens} tokens, median ${times[2].toFixed(1)} ms (${(mb / times[2] * 1e3).toFixed(1)} MB/s), min ${times[0].toFixed(1)} ms`);
}
