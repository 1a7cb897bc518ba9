// GPT-2's encoder.json + vocab.bpe as a Hugging Face tokenizer.json (model BPE, ByteLevel
// pre-tokenizer and decoder, <|endoftext|> an added special token), so the test reads the
// same model through fulgur's other loader. usage: node gpt2_to_tokenizer_json.js PKG OUT
'use strict';
const fs = require('fs');
const path = require('path');
const [pkg, out] = process.argv.slice(2);
const vocab = JSON.parse(fs.readFileSync(path.join(pkg, 'encoder.json'), 'utf8'));
const lines = fs.readFileSync(path.join(pkg, 'vocab.bpe'), 'utf8').split('\n');
const merges = lines.slice(1).filter(l => l.length > 0);
const tok = {
  version: '1.0', truncation: null, padding: null,
  added_tokens: [{ id: vocab['<|endoftext|>'], content: '<|endoftext|>', single_word: false,
                   lstrip: false, rstrip: false, normalized: true, special: true }],
  normalizer: null,
  pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
  post_processor: null,
  decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
  model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: '',
           end_of_word_suffix: '', fuse_unk: false, byte_fallback: false, vocab, merges },
};
fs.writeFileSync(out, JSON.stringify(tok));
