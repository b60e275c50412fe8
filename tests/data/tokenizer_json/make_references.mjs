// Reference ids and texts from Hugging Face's `tokenizers` (the Rust library through its Node
// binding, npm package `tokenizers`; installed outside the project, never a dependency) for the
// tokenizer.json layouts write_layouts.py writes. Usage:
//   NODE_PATH=DIR/node_modules node make_references.mjs LAYOUT_DIR REPO_ROOT > references.json
import { createRequire } from "module";
import fs from "fs";
import path from "path";
const require = createRequire(import.meta.url);
const { Tokenizer } = require(process.env.NODE_PATH ? path.join(process.env.NODE_PATH, "tokenizers") : "tokenizers");

const [layoutDir, root] = process.argv.slice(2);
const texts = [
  "", " ", "   ", "Hello world", "  Hello   world  ", "Hello\tworld\nnext\r\nline", "a\u00a0b\u3000c\u2003d",
  "It's the end.  Isn't it?", "ﬁne ﬂour ① ② ™ ℌ ㎏ ｱｲｳ ｶﾞ ＦＵＬＬ　ＷＩＤＴＨ", "Å Å e\u0301 a\u0308\u0301 ñ n\u0303",
  "zero\u200bwidth soft\u00adhyphen", "\u0001control\u001f chars\u007f", "x\u0300\u0301\u0302\u0303 y",
  "Hello</s>world", "a <unk> b", "<extra_id_0> filled <extra_id_99>", "<pad><pad></s>", "<mask> x <mask>y",
  "<s>Hi</s>", "</s> at start", "end </s>", "<mask_1> <unk_7>",
  "Привет, мир! Ελληνικά. עברית. العربية. हिन्दी. ไทย. 中文字符。日本語のテキスト。한국어 텍스트. ქართული.",
  "👍🏽 👨‍👩‍👧 🇫🇷🇩🇪 ❤️ 1️⃣ 🏳️‍🌈 😀😀", "ǅ Ǆ ǆ ſ ß ẞ İ ı", "Ⅻ ⅻ ¼ ½ ² ³ ℃ №",
  "caf\u00e9 vs cafe\u0301", "Mr. Darcy said: \"No -- never!\"", "1234567890 3.14159 1,000,000",
  "\u0915\u094d\u0937 \u0e01\u0e33", "\ud55c\u1100\u1161\u11a8", "\u00e9\u0301", "ｶﾞ\u3099",
  "   leading and trailing   ", "tabs\t\tand\u000b\u000cvertical",
  // Segmentations of equal score (the same pieces in another order): tokenizers keeps the first found.
  "both ..... Ah hkkk! Rrrrrrrmmmmm.",
];
// Random strings over the blocks where normalization and grapheme clusters matter (combining
// marks, Hangul jamo, variation selectors, ZWJ, regional indicators, skin tones, half- and
// full-width forms, ligatures, controls), from a fixed linear congruential generator.
let seed = 12345;
const rnd = () => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed / 2147483648; };
const ranges = [[0x20, 0x7e], [0xa0, 0x24f], [0x300, 0x36f], [0x370, 0x3ff], [0x400, 0x4ff], [0x590, 0x6ff], [0x900, 0x97f],
  [0xe00, 0xe7f], [0x1100, 0x11ff], [0x2000, 0x206f], [0x2100, 0x24ff], [0x3000, 0x30ff], [0x4e00, 0x4e80], [0xac00, 0xac40],
  [0xfe00, 0xfe0f], [0xff00, 0xffef], [0x1f1e6, 0x1f1ff], [0x1f300, 0x1f64f], [0x1f3fb, 0x1f3ff], [0x200d, 0x200d], [0x9, 0xd],
  [0xfb00, 0xfb4f]];
const randomTexts = [];
for (let i = 0; i < 600; i++) {
  let s = "";
  const n = 1 + Math.floor(rnd() * 12);
  for (let k = 0; k < n; k++) {
    const r = ranges[Math.floor(rnd() * ranges.length)];
    s += String.fromCodePoint(r[0] + Math.floor(rnd() * (r[1] - r[0] + 1)));
  }
  randomTexts.push(s);
}
const books = ["examples/data/pride_and_prejudice.txt", "examples/data/war_and_peace.txt"];

// FNV-1a (64-bit) over the ids as little-endian int32: what the test computes too.
function fnv(ids) {
  let h = 0xcbf29ce484222325n;
  const p = 0x100000001b3n, m = (1n << 64n) - 1n;
  for (const id of ids) {
    for (let k = 0; k < 4; k++) {
      h ^= BigInt((id >>> (8 * k)) & 0xff);
      h = (h * p) & m;
    }
  }
  return h.toString(16).padStart(16, "0");
}

const out = { generator: "make_references.mjs", tokenizers_version: require(path.join(process.env.NODE_PATH || "", "tokenizers/package.json")).version, layouts: {} };
for (const layout of fs.readdirSync(layoutDir).sort()) {
  const file = path.join(layoutDir, layout, "tokenizer.json");
  if (!fs.existsSync(file)) continue;
  const tok = Tokenizer.fromFile(file);
  const cases = [];
  for (const text of texts) {
    const enc = await tok.encode(text);
    const ids = enc.getIds();
    cases.push({ text, ids, decoded: await tok.decode(ids, true), decoded_special: await tok.decode(ids, false) });
  }
  const random = [];
  for (const text of randomTexts) {
    const ids = (await tok.encode(text)).getIds();
    random.push({ text, ids, decoded: await tok.decode(ids, true) });
  }
  const bookRefs = [];
  for (const b of books) {
    const text = fs.readFileSync(path.join(root, b), "utf8");
    const ids = (await tok.encode(text)).getIds();
    bookRefs.push({ file: b, count: ids.length, fnv1a64: fnv(ids), head: Array.from(ids.slice(0, 40)),
                    decoded_fnv1a64_of_first_2000: fnvText(await tok.decode(Array.from(ids.slice(0, 2000)), true)) });
  }
  out.layouts[layout] = { cases, random, books: bookRefs };
}
function fnvText(s) { return fnv(Array.from(Buffer.from(s, "utf8"))); }
process.stdout.write(JSON.stringify(out, null, 1) + "\n");
