"""A deterministic corpus of strings that stress tokenizers (tests/llm/test_tokenizer*.py): multilingual text,
code, emoji, whitespace runs, digits, special tokens written in the text, lone surrogates, very long words."""

from __future__ import annotations

import random
import unicodedata

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<repo_name>", "<file_sep>", "<jupyter_code>"]

SCRIPTS = [
    "你好，世界！这是一个测试。", "日本語のテキストとカタカナ ー ひらがな", "한국어 텍스트입니다", "Россия и Україна, ёжик ЖЭЮЯ",
    "مرحبا بالعالم، كيف حالك؟", "नमस्ते दुनिया, हिन्दी पाठ", "Ελληνικά γράμματα ΑΒΓ", "עברית שלום", "ภาษาไทย สวัสดี",
    "Café naïve résumé façade Ångström Øre ß İstanbul", "ქართული", "Tiếng Việt có dấu", "ᚠᚢᚦᚨᚱᚲ", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝒮𝒸𝓇𝒾𝓅𝓉",
    "ﬁ ﬂ ﬀ ligatures", "Ｆｕｌｌｗｉｄｔｈ　ｔｅｘｔ", "ｶﾀｶﾅ", "½ ¼ ¾ ² ³ ¹ ⅓ Ⅻ ⅷ ٣٤٥ १२३ ௫ ①②",
]
EMOJI = [
    "😀", "👍🏽", "🇺🇸", "🇯🇵🇫🇷", "❤️", "👨‍👩‍👧‍👦", "🏳️‍🌈", "👩🏾‍💻", "1️⃣", "#️⃣", "🧑‍🤝‍🧑", "✨", "🙈🙉🙊",
    "🏴󠁧󠁢󠁳󠁣󠁴󠁿", "☕︎", "©️", "🫠",
]
WORDS = [
    "hello", "Hello", "HELLO", "world", "the", "The", "tokenizer", "byte", "level", "naïve", "x", "a", "I",
    "über", "Straße", "don", "can", "it", "we", "they", "SmolLM2", "GPT", "foo_bar", "camelCase", "snake_case",
    "URL", "https://example.com/a?b=1&c=2#frag", "user@mail.org", "e.g.", "i.e.", "a.b.c", "C++", "C#", "F#",
]
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Re", "'rE", "'VE", "'M", "'LL",
                "'D", "'", "''", "'''", "'x", "'sa", "'lla", "'dd", "’s", "‘t"]
PUNCT = ["!", "?", "...", "!!!", "?!", ",", ".", ";", ":", "--", "—", "–", "(", ")", "[]", "{}", "<>", "<<", ">>",
         "\"", "«»", "“quoted”", "@", "#", "$", "%", "^", "&", "*", "~", "`", "|", "\\", "/", "_", "+=", "->",
         "=>", "::", "¿", "¡", "。", "、", "…", "§", "¶", "•", "°", "€", "£", "¥", "₹", "<|", "|>", "<|im", "im_end|>"]
WHITESPACE = [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", " \n", "\n ", " \t ", "\u00a0", "\u2003", "\u3000",
              "\u2009", "\u202f", "\u205f", "\u1680", "\u2028", "\u2029", "\x0b", "\x0c", "\x85", "\x1c", "\x1d", "\x1e",
              "\x1f", "\u200b", "\u200d", "\ufeff", "\u180e"]
CODE = [
    "def foo(x):\n    return x ** 2  \n",
    "for (int i = 0; i < n; ++i) { sum += a[i]; }",
    "const f = async () => { await fetch('/api'); };",
    "#include <stdio.h>\nint main(void) {\n\tprintf(\"%d\\n\", 42);\n}\n",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name;",
    "if __name__ == '__main__':\n    main()\n",
    "    indented\n        more\n\t\ttabs\n",
    "<div class=\"x\">Hi &amp; bye</div>",
    "x = [1, 2, 3]  # comment\ny = {'a': 1}\n",
    "fn main() -> Result<(), Box<dyn Error>> { Ok(()) }",
    "$ ls -la | grep '.py' > out.txt 2>&1",
    "{\"key\": [1.5e-3, -2, null, true]}",
]


def numbers(rng: random.Random) -> str:
    kind = rng.randrange(6)
    digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 30)))
    if kind == 0:
        return digits
    if kind == 1:
        return f"{rng.randint(-10**6, 10**6)}.{rng.randint(0, 10**rng.randint(1, 8))}"
    if kind == 2:
        return f"{rng.randint(1, 10**9):,}"
    if kind == 3:
        return f"{rng.random():.6e}"
    if kind == 4:
        return f"v{rng.randint(0, 20)}.{rng.randint(0, 99)}.{rng.randint(0, 999)}"
    return f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d} {rng.randint(1900, 2100)}-{rng.randint(1, 12):02d}"


def random_codepoints(rng: random.Random, n: int) -> str:
    """Assigned, non-surrogate, non-private code points from the BMP and the emoji/CJK planes."""
    out: list[str] = []
    while len(out) < n:
        cp = rng.choice([rng.randrange(0x20, 0x3000), rng.randrange(0x3000, 0xFFFE), rng.randrange(0x1F000, 0x1FAFF),
                         rng.randrange(0x20000, 0x2A6DF)])
        ch = chr(cp)
        if unicodedata.category(ch) not in ("Cn", "Cs", "Co"):
            out.append(ch)
    return "".join(out)


LONG = ["a" * 3000, "ab" * 1500, "1" * 2500, " " * 3000, "\n" * 600, "😀" * 400, "x" * 1000 + " y", "ñ" * 800,
        "supercalifragilisticexpialidocious" * 40, "日本" * 600, "\u00a0" * 300, "\t \n" * 300, "e\u0301" * 300,
        "Pneumonoultramicroscopicsilicovolcanoconiosis " * 20, "-" * 1200, "0123456789" * 200, "👍🏽" * 150]
# Lone surrogates (what a JS string may hold): encoders write U+FFFD for them, pairs join into one character.
SURROGATES = ["\ud83d", "a\udc00b", "\ud83d\ude00 pair", "x\ud800", "\udfff\ud800 two", "end \udbff"]


def fragment(rng: random.Random, specials: list[str] = SPECIALS) -> str:
    kind = rng.randrange(11)
    if kind == 0:
        return rng.choice(SCRIPTS)
    if kind == 1:
        return rng.choice(EMOJI)
    if kind == 2:
        return rng.choice(WORDS)
    if kind == 3:
        return rng.choice(WORDS) + rng.choice(CONTRACTIONS)
    if kind == 4:
        return "".join(rng.choice(PUNCT) for _ in range(rng.randint(1, 4)))
    if kind == 5:
        return rng.choice(WHITESPACE)
    if kind == 6:
        return rng.choice(CODE)
    if kind == 7:
        return numbers(rng)
    if kind == 8:
        return rng.choice(specials)
    if kind == 9:
        return unicodedata.normalize(rng.choice(["NFD", "NFC", "NFKD"]), rng.choice(SCRIPTS + WORDS))
    return random_codepoints(rng, rng.randint(1, 6))


def valid(text: str) -> str:
    """What a UTF-8 encoder writes for `text`: surrogate pairs joined, lone surrogates as U+FFFD (`tokenizers`
    only takes valid text)."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def build_corpus(n_random: int = 3200, seed: int = 1234, specials: list[str] | None = None,
                 surrogates: bool = False) -> list[str]:
    """Hand-picked edge cases, then `n_random` random mixes of fragments and separators (`specials`: the added
    tokens to write into the text, SmolLM2's by default; `surrogates`: also strings holding lone surrogates)."""
    specials = specials or SPECIALS
    rng = random.Random(seed)
    corpus = ["", " ", "  ", "\n", "a", "'", "'s", " 's", "I'm", "I'M", "it's it'S", "you're", "we've", "they'll",
              "he'd", "don't DON'T Don't", "''s'", "x's's", "2024", " 2024", "3.14159", "1,000,000", "-42",
              "a1b2c3", "１２３", "hello  world", "trailing   ", "   leading", "a\n\n\nb", "a \n b", "\t\tx",
              "end with newline\n", "<|im_start|>", "<|im_start|><|im_end|>", "a<|im_end|>b", " <|im_end|> ",
              "<|im_start|user", "<<|im_start|>>", "<|endoftext|><|endoftext|>", "🇺🇸🇺🇸🇺🇸", "👨‍👩‍👧‍👦 family",
              "e\u0301 combining", "a\u0300\u0301\u0302", "\u0301 leading mark", "\ufffd replacement", "\x00 nul \x7f"]
    corpus += SCRIPTS + EMOJI + CODE + [w + c for w in ("it", "IT", "", " ") for c in CONTRACTIONS]
    corpus += [sp * k for sp in WHITESPACE[:12] for k in (1, 3)] + ["x" + sp + "y" for sp in WHITESPACE]
    corpus += [numbers(rng) for _ in range(60)] + ["9" * k for k in range(1, 25)] + LONG
    corpus += SURROGATES if surrogates else []
    corpus += [f"{a}{sp}{b}" for sp in ("", " ", "  ", "\n") for a in specials[:4] for b in ("x", specials[-1], "")]
    corpus += [f"word{sp}{t}{sp}word" for t in specials for sp in ("", " ", "  ")]
    seps = ["", " ", " ", " ", "  ", "\n", "\t", ", ", ". ", "\n\n"]
    for _ in range(n_random):
        parts = [fragment(rng, specials) for _ in range(rng.randint(1, 8))]
        text = "".join(p + rng.choice(seps) for p in parts)
        if rng.random() < 0.15:
            text = text.rstrip() + rng.choice(WHITESPACE)
        corpus.append(text)
    return corpus
