"""The multilingual texts the tokenizer goldens are made from (scripts/make_tokenizer_goldens.py for
SmolLM2, scripts/make_vocab_goldens.py for llama.cpp's Qwen2, Llama 3 and SentencePiece vocabularies):
Latin accents and combining marks, CJK, Korean, Arabic, Hebrew, Cyrillic, Greek, Devanagari, Thai,
emoji with ZWJ sequences, digits, whitespace runs, contractions, punctuation, code, and special
tokens (recorded with parse_special on and off). Append only: the goldens follow this order.
"""

# Each entry: (text, parse_special values to record).
BOTH = (False, True)
PLAIN = (False,)
TEXTS = [
    ("", BOTH),
    ("Hello, we can use", PLAIN),
    ("The capital of France is", PLAIN),
    ("You are a helpful AI assistant named SmolLM, trained by Hugging Face", PLAIN),
    ("\n", PLAIN),
    ("Hello world! 123", PLAIN),
    ("Café déjà vu.", PLAIN),
    ("  multiple   spaces", PLAIN),
    # accents, combining marks, scripts
    ("naïve façade coöperate résumé Ångström", PLAIN),
    ("e\u0301 a\u0300 n\u0303 o\u0308\u0304 (combining marks)", PLAIN),
    ("Straße, Œuvre, æther, Ørsted, Łódź, Dvořák", PLAIN),
    ("中文分词测试：我们今天去北京。", PLAIN),
    ("日本語のテキスト、カタカナとひらがな。", PLAIN),
    ("한국어 문장입니다.", PLAIN),
    ("مرحبا بالعالم! هذا نص عربي.", PLAIN),
    ("שלום עולם", PLAIN),
    ("Привет, мир! Ёжик в тумане.", PLAIN),
    ("Γειά σου Κόσμε", PLAIN),
    ("हिन्दी पाठ का उदाहरण", PLAIN),
    ("ไทย ภาษา", PLAIN),
    # emoji (multi-codepoint, ZWJ, flags, skin tones)
    ("I love 🍕 and 🚀!", PLAIN),
    ("👨‍👩‍👧‍👦 family, 🇫🇷 flag, 👍🏽 thumbs", PLAIN),
    ("🙂🙃😉😊😇🥰😍🤩", PLAIN),
    # digits and numbers
    ("0123456789", PLAIN),
    ("3.14159265358979323846", PLAIN),
    ("The year 2024 had 366 days; 1,000,000 people; -42 and +7e10.", PLAIN),
    ("٠١٢٣٤٥٦٧٨٩ Arabic-Indic digits, ½ ² Ⅻ", PLAIN),
    ("a1b2c3 x86_64 v1.2.3-rc4", PLAIN),
    # whitespace
    ("\t\ttabs\tand  spaces  ", PLAIN),
    ("line one\nline two\n\nline four\n\n\n", PLAIN),
    ("windows\r\nline\r\nendings\r\n", PLAIN),
    ("   leading and trailing   ", PLAIN),
    (" ", PLAIN),
    ("    ", PLAIN),
    ("\n\n\n\n", PLAIN),
    ("a \nb \t\nc", PLAIN),
    ("nbsp\u00a0here, nel\u0085there, ideographic\u3000space, em\u2003space", PLAIN),
    ("zero\u200bwidth and bom\ufeff and \u001cfile sep", PLAIN),
    # which code points count as \s: runs of spaces ending in each candidate, then a letter
    ("x  \u0085y x  \u00a0y x  \u2003y x  \u3000y x  \u200by x  \u001cy x  \u180ey", PLAIN),
    # contractions
    ("I'm sure you're right, they've said we'll go and he'd know it's John's.", PLAIN),
    ("I'M SURE YOU'RE RIGHT, THEY'VE SAID WE'LL GO, IT'S JOHN'S.", PLAIN),
    ("Don't won't can't shouldn't y'all 'tis rock'n'roll", PLAIN),
    ("'s 't 're 've 'm 'll 'd 'S 'T 'RE", PLAIN),
    # punctuation
    ("Hello!!! What??? ... ,,, ;;; ---", PLAIN),
    ("\"quoted\" 'single' `back` «guillemets» „low“ — dash – en…", PLAIN),
    ("email@example.com https://example.org/path?q=1&r=2#frag", PLAIN),
    ("$100 + 50% = <result> ^_^ | ~tilde~ {braces} [brackets]", PLAIN),
    # code
    ("def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n", PLAIN),
    ("#include <stdio.h>\nint main(void) {\n\tprintf(\"%d\\n\", 42);\n\treturn 0;\n}\n", PLAIN),
    ("fn main() -> Result<(), Box<dyn Error>> { let v: Vec<u8> = vec![1, 2, 3]; Ok(()) }", PLAIN),
    ("const f = async (x) => { await fetch(`/api/${x}`); };  // JS", PLAIN),
    ("SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC;", PLAIN),
    ("<div class=\"a\"><span>text</span></div>", PLAIN),
    ("    \tmixed = {'key': [1, 2.5, None], \"k2\": True}\n", PLAIN),
    ("x==y!=z<=w>=v&&u||t<<1>>2", PLAIN),
    # special tokens
    ("<|im_start|>user\nHi<|im_end|>", BOTH),
    ("<|endoftext|>", BOTH),
    ("text<|im_end|>more<|im_start|>", BOTH),
    ("<|im_start|><|im_start|><|im_end|>", BOTH),
    ("<repo_name>conveyor<file_sep>main.cpp<filename>x", BOTH),
    ("<|im_start |> <|im_end|x <im_end>", BOTH),
    ("<jupyter_code>print(1)<jupyter_output>1<empty_output>", BOTH),
    ("<|im_start|> leading space after bos", BOTH),
    # chat-formatted text
    ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
     "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n", BOTH),
    ("<|im_start|>user\nTranslate \"bonjour\" to English.<|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n", BOTH),
    # mixed / long
    ("Mixed: English, Français, 中文, العربية, 🚀, 12345, and code `x += 1`.", PLAIN),
    ("The quick brown fox jumps over the lazy dog. " * 8, PLAIN),
    ("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", PLAIN),
    ("----------------------------------------------------------------------", PLAIN),
    ("                                                                   x", PLAIN),
]
