// A seeded text corpus for the tokenizer parity test: node make_corpus.js OUT MEGABYTES SEED.
// Lines mix English (contractions 's 't 're 've 'm 'll 'd, capitalised ones too), accented
// Latin, Cyrillic, Greek, CJK, Arabic, Devanagari, numbers of every length, runs of spaces,
// tabs and blank lines, punctuation runs, emoji (with skin tones and ZWJ sequences),
// Unicode spaces (U+00A0, U+3000) and the text "<|endoftext|>" (ordinary text to both
// encoders).
'use strict';
const fs = require('fs');
const [out, mb, seedArg] = process.argv.slice(2);
let seed = BigInt(seedArg || 1);
function rand() { // splitmix64, the top 32 bits
  seed = (seed + 0x9e3779b97f4a7c15n) & 0xffffffffffffffffn;
  let z = seed;
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & 0xffffffffffffffffn;
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & 0xffffffffffffffffn;
  return Number((z ^ (z >> 31n)) >> 32n) / 4294967296;
}
const pick = a => a[Math.floor(rand() * a.length)];
const pools = [
  "the quick brown fox jumps over lazy dog and then it's gone while they're sure we've seen I'm you'll he'd".split(' '),
  "IT'S DON'T WE'RE THEY'VE I'M YOU'LL SHE'D o'clock rock'n'roll ma'am y'all".split(' '),
  "naïve café résumé façade crème brûlée Ångström Ærøskøbing señor niño über straße Łódź Dvořák".split(' '),
  "Привет мир как дела это тестовая строка Съешь же ещё этих мягких французских булок".split(' '),
  "Γειά σου κόσμε η γρήγορη καφέ αλεπού πηδά πάνω από τον σκύλο".split(' '),
  ['你好世界', '今天天气很好', '東京都', 'こんにちは', 'カタカナ', '한국어 텍스트', '中文分词测试', '漢字'],
  "مرحبا بالعالم هذا نص تجريبي باللغة العربية".split(' '),
  "नमस्ते दुनिया यह एक परीक्षण वाक्य है हिन्दी".split(' '),
  ['😀', '👍🏽', '👨‍👩‍👧‍👦', '🇫🇷', '❤️', '🎉🎉', '🤖', '✨'],
  ['!', '?!', '...', '---', '(', ')', '[x]', '{}', '"', "'", ',', ';', ':', '@#$%', '&&', '||', '<|endoftext|>', '//', '\\', '»«', '—', '…'],
];
function number() {
  const n = Math.floor(rand() * 6);
  if (n === 0) return String(Math.floor(rand() * 10));
  if (n === 1) return String(Math.floor(rand() * 1e9));
  if (n === 2) return (rand() * 1e4).toFixed(3);
  if (n === 3) return '1' + '0'.repeat(Math.floor(rand() * 30));
  if (n === 4) return '٣٤٥'; // Arabic-Indic digits
  return '2026-11-28';
}
function space() {
  const r = rand();
  if (r < 0.8) return ' ';
  if (r < 0.88) return ' '.repeat(2 + Math.floor(rand() * 8));
  if (r < 0.93) return '\t';
  if (r < 0.96) return '\u00a0';
  if (r < 0.98) return '\u3000';
  return ' \t ';
}
function line() {
  const words = 1 + Math.floor(rand() * 20);
  let s = rand() < 0.1 ? ' '.repeat(1 + Math.floor(rand() * 4)) : '';
  for (let i = 0; i < words; i++) {
    const r = rand();
    s += r < 0.12 ? number() : r < 0.2 ? pick(pools[9]) : pick(pick(pools));
    if (i + 1 < words) s += space();
  }
  const end = rand();
  return s + (end < 0.05 ? '   ' : end < 0.08 ? '\t' : '');
}
const target = Number(mb) * 1e6;
const fd = fs.openSync(out, 'w');
let size = 0;
while (size < target) {
  let block = '';
  for (let i = 0; i < 1000; i++) {
    block += line();
    const r = rand();
    block += r < 0.8 ? '\n' : r < 0.95 ? '\n\n' : r < 0.98 ? '\r\n' : '\n\n\n\n';
  }
  const buf = Buffer.from(block, 'utf8');
  fs.writeSync(fd, buf);
  size += buf.length;
}
fs.closeSync(fd);
