// Deterministic generator of tokenizer test strings (>= 5,000): English prose, code, whitespace
// and digit runs, many scripts, emoji (ZWJ sequences, skin tones, flags), literal special tokens,
// combining marks, NFC/NFD pairs, CR/LF/tab mixes, long words. Prints one JSON string per line.
//   node gen_strings.js [count]
'use strict';
let seed = 0x9e3779b9;
function rnd() {  // xorshift32
  seed ^= seed << 13; seed >>>= 0; seed ^= seed >>> 17; seed ^= seed << 5; seed >>>= 0;
  return seed / 4294967296;
}
const pick = (a) => a[Math.floor(rnd() * a.length)];
const int = (lo, hi) => lo + Math.floor(rnd() * (hi - lo + 1));

const words = ('the of and to in is was that he for it with as his on be at by had are but from or ' +
  'have an they which one you were her all she there would their we him been has when who will more no ' +
  'if out so said what up its about into than them can only other new some could time these two may then ' +
  'do first any my now such like our over man me even most made after also did many before must through ' +
  'back years where much your way well down should because each just those people how too little state ' +
  'good very make world still own see men work long get here between both life being under never day same ' +
  'another know while last might us great old year off come since against go came right used take three ' +
  'Elizabeth Darcy Bennet Pemberley Jerusalem Moses Israel Egypt LORD King David Solomon Babylon ' +
  "don't can't I'm you're we've they'll she'd it's O'Brien rock'n'roll naïve café résumé coöperate " +
  'internationalization antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis ' +
  'HTTPServer XMLHttpRequest camelCaseIdentifier snake_case_name SCREAMING_CASE kebab-case').split(/ +/);
const punct = ['.', ',', ';', ':', '!', '?', '...', ' -- ', '—', '–', '"', "'", '(', ')', '[', ']', '“', '”', '‘', '’', '«', '»', '¿', '¡'];

function sentence() {
  const n = int(3, 18); const out = [];
  for (let i = 0; i < n; i++) {
    let w = pick(words);
    if (i === 0) w = w[0].toUpperCase() + w.slice(1);
    if (rnd() < 0.05) w = w.toUpperCase();
    out.push(w);
    if (rnd() < 0.1) out.push(pick(punct));
  }
  return out.join(' ') + pick(['.', '!', '?', '.', '."', '...']);
}

const scripts = {
  cjk: '的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长知民样现分将外但身些与高意进把法此实回二理美点月明其种声全工己话儿者向情部正名定女问力机给等几很业最间新什打便位因重被走电四第门相次东政海口使教西再平真听世气信北少关并内加化由却代军产入先山五太水万市眼体别处总才场师书比住员九笑性通目华报立马命张活难神数件安表原车白应路期叫死常提感金何更反合放做系计或司利受光王果亲界及今京务制解各任至清物台象记边共风战干接它许八特觉望直服毛林题建南度统色字请交爱让认算论百吃义科怎元社术结六功指思非流每青管夫连远资队跟带花快条院变联言权往展该领传近留红治决周保达办运武半候七必城父强步完革深区即求品士转量空甚众技轻程告江语英基派满式李息写呢识极令黄德收脸钱党倒未持取设始版双历越史商千片容研像找友孩站广改议形委早房音火际则首单据导影失拿网香似斯专石若兵弟谁校读志飞观争究包组造落视济喜离虽坏兴',
  ja: 'こんにちは世界。日本語のテキストです。カタカナとひらがな、漢字が混ざっています。東京駅から新幹線で大阪へ行きました。ラーメンを食べたい！',
  ko: '안녕하세요 세계. 한국어 텍스트입니다. 서울에서 부산까지 기차를 타고 갔습니다. 대한민국의 수도는 서울입니다.',
  ar: 'مرحبا بالعالم. هذا نص باللغة العربية. اللغة العربية جميلة جدا، وهي لغة القرآن الكريم. ١٢٣٤٥٦٧٨٩٠',
  he: 'שלום עולם. זהו טקסט בעברית. ירושלים היא בירת ישראל.',
  hi: 'नमस्ते दुनिया। यह हिंदी में एक पाठ है। भारत एक विशाल देश है। १२३४५६७८९०',
  bn: 'হ্যালো বিশ্ব। এটি বাংলা ভাষার একটি লেখা।',
  ta: 'வணக்கம் உலகம். இது தமிழ் உரை.',
  th: 'สวัสดีชาวโลก นี่คือข้อความภาษาไทย ประเทศไทยมีอาหารอร่อยมาก',
  ru: 'Привет, мир! Это текст на русском языке. Москва — столица России. Ёлка, щука, объём.',
  uk: 'Привіт, світе! Це український текст. Київ — столиця України. Ґанок, їжак, єнот.',
  el: 'Γειά σου Κόσμε! Αυτό είναι ελληνικό κείμενο. Η Αθήνα είναι η πρωτεύουσα. ΣΊΣΥΦΟΣ ςσΣ',
  hy: 'Բարեւ աշխարհ։ Սա հայերեն տեքստ է։',
  ka: 'გამარჯობა მსოფლიო. ეს არის ქართული ტექსტი.',
  am: 'ሰላም ልዑል። ይህ የአማርኛ ጽሑፍ ነው።',
  vi: 'Xin chào thế giới. Đây là văn bản tiếng Việt. Hà Nội là thủ đô của Việt Nam.',
  tr: 'Merhaba dünya. İstanbul büyük bir şehir. Işık, ığdır, İİİ ııı.',
  de: 'Größe, Straße, Übermäßig, Fußgängerübergänge, ẞ ß.',
  pl: 'Zażółć gęślą jaźń. Łódź i Kraków.',
  my: 'မင်္ဂလာပါ ကမ္ဘာ',
  km: 'សួស្តី​ពិភពលោក',
  si: 'ආයුබෝවන් ලෝකය',
  mn: 'Сайн байна уу ᠮᠣᠩᠭᠣᠯ',
  math: '∀x∈ℝ: x²≥0; ∑ᵢ aᵢ = ∫₀^∞ f(t) dt ≈ 3.14159 ± 0.001; α β γ δ ε ζ η θ; ½ ¾ ⅓ Ⅻ ① ⑳ 𝔾𝕠𝕠𝕕 𝐀𝐁𝐂',
  symbols: '©®™ §¶ †‡ •◦ ←→↑↓ ♠♣♥♦ ★☆ ✓✗ ☺☹ ♪♫ ¢£¥€₹₽ ‰ ° ℃ № ℓ ℮',
};
const emoji = ['😀', '😂', '🤣', '❤️', '👍', '👍🏽', '👋🏿', '🙏🏻', '👨‍👩‍👧‍👦', '👩‍💻', '🧑🏾‍🚀', '🏳️‍🌈', '🏴‍☠️',
  '🇺🇸', '🇯🇵', '🇫🇷', '🏴󠁧󠁢󠁳󠁣󠁴󠁿', '❤️‍🔥', '🫠', '🥲', '🧪', '🦀', '🐍', '☕', '⚡', '✨', '🔥', '1️⃣', '#️⃣', '©️',
  '👁️‍🗨️', '🤷‍♀️', '💁🏼‍♂️', '🫶🏽', '🧔🏻‍♀️'];
const specials = ['<|im_start|>', '<|im_end|>', '<|endoftext|>', '<|begin_of_text|>', '<|end_of_text|>',
  '<|eot_id|>', '<|start_header_id|>', '<|end_header_id|>', '<think>', '</think>', '<tool_call>', '</tool_call>',
  '<|fim_prefix|>', '<|endofprompt|>', '<|reserved_special_token_5|>', '<|im_start', 'im_end|>', '<|', '|>', '<s>', '</s>'];
const code = [
  'def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n',
  'for (int i = 0; i < n; ++i) {\n\tsum += a[i] * b[i];\n}\n',
  'const x = {a: 1, "b": [1, 2, 3], c: null}; // comment\n',
  '#include <stdio.h>\nint main(void) { printf("%d\\n", 42); return 0; }\n',
  'SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC LIMIT 10;',
  '<html><body class="main"><p>Hello &amp; welcome!</p></body></html>',
  '{"key": "value", "list": [1, 2.5, -3e10, true, false, null], "nested": {"x": "y"}}',
  'fn main() -> Result<(), Box<dyn Error>> { let v: Vec<u8> = vec![0xFF; 16]; Ok(()) }',
  '    if (x != y && !z || w) { return a->b.c[i]++; }',
  'git commit -m "Fix bug #1234" && git push origin main --force-with-lease',
  'https://example.com/path/to/page?query=1&other=two#fragment',
  'user@example.org, +1 (555) 123-4567, 192.168.0.1:8080, 2024-01-15T12:34:56Z',
  '$ ls -la /usr/local/bin | grep -E "^-rwx" | wc -l',
  'λx. λy. x y ≡ K; ∀ f: A → B, f ∘ id = f',
];
const nfcPairs = [['é', 'e\u0301'], ['Å', 'A\u030A'], ['ñ', 'n\u0303'], ['ệ', 'e\u0323\u0302'], ['가', '\u1100\u1161'],
  ['ḱ', 'k\u0301'], ['ǖ', 'u\u0308\u0304'], ['Ω', '\u2126'], ['ﬁ', 'fi'], ['Ä', 'A\u0308']];
const combining = ['a\u0300\u0301\u0302', 'Z̷̢̛̯̬̹a̴̡̰͇l̸̨̛͕g̷̜̈́o̵̧̊', 'e\u0301\u0301\u0301', '\u0301start', 'x\u20DD', 'क्षत्रिय', 'ﷺ', '\u200Bzero\u200Bwidth\u200B', 'a\u200Db\u200Cc', '\uFEFFbom'];
const spaces = [' ', '  ', '   ', '\t', '\n', '\r\n', '\n\n', '\r', '\u00A0', '\u2003', '\u3000', ' \n ', '\t\t', '\u000B', '\u000C', '\u0085', '\u2028', '\u180E', ' \t \n'];

function digits() {
  const kinds = [() => String(int(0, 9)), () => String(int(0, 99999)), () => String(int(0, 1e9)) + String(int(0, 1e9)),
    () => (rnd() * 1000).toFixed(int(1, 6)), () => '٣٤٥', () => '१२३', () => '１２３', () => '2,147,483,647', () => '3.14e-10'];
  return pick(kinds)();
}
function wsRun() { let s = ''; const n = int(1, 12); for (let i = 0; i < n; i++) s += pick(spaces); return s; }
function scriptText() { const t = Array.from(pick(Object.values(scripts))); const a = int(0, Math.max(0, t.length - 10)); return t.slice(a, a + int(3, 60)).join(''); }
function longWord() { let w = ''; const n = int(30, 300); const alpha = pick(['abcdefghijklmnopqrstuvwxyz', 'aaaa', 'ab', '0123456789', '!?.', 'あいう', 'лор']); for (let i = 0; i < n; i++) w += alpha[int(0, alpha.length - 1)]; return w; }
function bmpRandom() { let s = ''; const n = int(1, 12); for (let i = 0; i < n; i++) { let c; do { c = int(0x20, 0xFFFD); } while (c >= 0xD800 && c <= 0xDFFF); s += String.fromCodePoint(c); } return s; }
function astralRandom() { let s = ''; const n = int(1, 6); const planes = [[0x10000, 0x1FFFF], [0x20000, 0x2A6DF], [0x1F300, 0x1FAFF]]; for (let i = 0; i < n; i++) { const [a, b] = pick(planes); s += String.fromCodePoint(int(a, b)); } return s; }

const gens = [
  () => sentence(), () => sentence() + ' ' + sentence(), () => pick(code), () => wsRun(),
  () => sentence() + wsRun() + sentence(), () => digits() + pick(['', ' ', '.', ',']) + digits(),
  () => scriptText(), () => scriptText() + ' ' + sentence(), () => pick(emoji) + pick(emoji) + ' ' + sentence(),
  () => sentence().replace(/ /g, () => pick([' ', ' ', ' ' + pick(emoji) + ' '])),
  () => pick(specials) + sentence() + pick(specials), () => `${pick(specials)}user\n${sentence()}${pick(specials)}\n`,
  () => { const p = pick(nfcPairs); return `${p[rnd() < 0.5 ? 0 : 1]}${pick(words)} ${p[0]}${p[1]}`; },
  () => pick(combining) + ' ' + pick(words), () => longWord(), () => pick(words) + wsRun(),
  () => wsRun() + pick(words), () => bmpRandom(), () => astralRandom(),
  () => sentence().split(' ').join(pick(spaces)), () => pick(code).replace(/\n/g, '\r\n'),
  () => digits() + pick(words) + digits(), () => "I'M YOU'RE WE'LL 'S 'T 'RE 'Ve 'LL 'd ’s",
  () => pick(punct) + pick(punct) + pick(punct) + pick(words),
];

const count = Number(process.argv[2] || 6000);
const out = [];
// Fixed edge cases first.
for (const s of ['', ' ', '  ', '\n', 'a', 'Hello, world! 你好', ' Hello', 'Hello ', '   leading and trailing   ',
  '<|im_start|>', '<|im_start|><|im_end|>', '<|endoftext|>hello<|endoftext|>', '\u0000', '\u007F', '\uFFFD', '\uFEFF',
  ...specials, ...emoji, ...Object.values(scripts), ...code, ...combining, ...nfcPairs.flat(), ...spaces]) out.push(s);
while (out.length < count) {
  let s = pick(gens)();
  if (rnd() < 0.15) s += pick(gens)();
  out.push(s);
}
process.stdout.write(out.map((s) => JSON.stringify(s)).join('\n') + '\n');
