// The reference ids: npm's gpt-3-encoder encodes IN (one document) and the ids are written
// as one llm.c shard OUT (256 int32 header: 20240520, 1, count; uint16 ids), an
// <|endoftext|> first, as `fulgur tokenize` writes a document.
// usage: node gpt2_reference.js PACKAGE_DIR IN OUT
// The package's encode() concatenates its result array once per word (quadratic in the
// text), so its own pattern (read from its Encoder.js) splits the text here and encode()
// runs on each match: a match encodes alone as it does in the whole text, since encode()
// splits by that same pattern first.
'use strict';
const fs = require('fs');
const path = require('path');
const [pkg, input, out] = process.argv.slice(2);
const { encode } = require(pkg);
const src = fs.readFileSync(path.join(pkg, 'Encoder.js'), 'utf8');
const m = src.match(/const pat = \/(.*)\/gu\n/);
if (!m) { console.error('gpt2_reference: no `const pat = /.../gu` in ' + pkg + '/Encoder.js'); process.exit(1); }
const pat = new RegExp(m[1], 'gu');
const encoderJson = JSON.parse(fs.readFileSync(path.join(pkg, 'encoder.json'), 'utf8'));
const eot = encoderJson['<|endoftext|>'];
const text = fs.readFileSync(input, 'utf8');
let ids = new Uint16Array(1 << 20), n = 0;
function push(id) {
  if (n === ids.length) { const bigger = new Uint16Array(ids.length * 2); bigger.set(ids); ids = bigger; }
  if (id === undefined || id > 65535) { console.error('gpt2_reference: no id for a token'); process.exit(1); }
  ids[n++] = id;
}
push(eot);
for (const match of text.matchAll(pat))
  for (const id of encode(match[0])) push(id);
const header = new Int32Array(256);
header[0] = 20240520; header[1] = 1; header[2] = n;
const fd = fs.openSync(out, 'w');
fs.writeSync(fd, Buffer.from(header.buffer));
fs.writeSync(fd, Buffer.from(ids.buffer, 0, n * 2));
fs.closeSync(fd);
console.log('gpt2_reference: ' + n + ' ids');
