// tiktoken (npm, Rust compiled to WASM) encoding FILE with GPT-2's encoding, as ordinary
// text (encode_ordinary: no special tokens), `runs` times after one untimed warm-up.
// Prints "tiktoken: N tokens, S s (best), R tokens/s". usage: node bench_tokenize_ref.js NPM_DIR FILE RUNS
'use strict';
const fs = require('fs');
const path = require('path');
const [npmDir, file, runsArg] = process.argv.slice(2);
const { get_encoding } = require(path.join(npmDir, 'node_modules', 'tiktoken'));
const enc = get_encoding('gpt2');
const text = fs.readFileSync(file, 'utf8');
let n = enc.encode_ordinary(text).length;
let best = Infinity;
for (let r = 0; r < Number(runsArg || 3); r++) {
  const t0 = process.hrtime.bigint();
  n = enc.encode_ordinary(text).length;
  best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e9);
}
enc.free();
console.log(`tiktoken: ${n} tokens, ${best.toFixed(3)} s (best), ${(n / best).toFixed(0)} tokens/s`);
