#!/usr/bin/env python3
"""Makes the reference values of tests/eval/test_rouge.cpp with Google's rouge-score and NLTK.

    /usr/bin/python3 tests/eval/make_rouge_reference.py --rouge-dir DIR [--books DIR]
        [--porter-out tests/data/eval/porter_reference.tsv] > table.txt

DIR holds the `rouge` package of google-research/google-research (its folder rouge/, with
rouge_scorer.py, tokenize.py, tokenizers.py and scoring.py); it is put first on sys.path and
imported as `rouge`. Nothing of it is copied here. NLTK and numpy are the system's (Debian 12:
python3-nltk 3.8, python3-numpy 1.24, python3-absl, python3-six).

It writes:
  * --porter-out: `word<TAB>stem` for a deterministic sample of the distinct words of the books
    (every [a-z0-9]+ run of the lowercased text, the tokens rouge-score would stem), chosen to
    cover every suffix the stemmer handles, plus the examples of Porter's paper and NLTK's
    extensions; the stems are NLTK's PorterStemmer() (mode NLTK_EXTENSIONS, as rouge-score makes it);
  * on stdout, two C++ tables to paste into test_rouge.cpp: the ROUGE cases (each pair of texts
    below scored with rouge1, rouge2, rougeL, rougeLsum, without and with the stemmer: 12 numbers,
    printed with repr so that they read back as the same doubles), and numpy.percentile
    (method linear, the default) on a few arrays.
"""

import argparse
import glob
import hashlib
import os
import re
import sys

# (target, prediction): our own short texts, each pair meant to exercise one thing.
CASES = [
    # rouge-score's README example
    ("The quick brown fox jumps over the lazy dog", "The quick brown dog jumps on the log."),
    # stemming: plurals, -ing, -ed, runs/running
    ("The cats were running quickly to the houses", "A cat runs quickly into the house"),
    ("she walked and talked while singing", "he walks, talks and sings"),
    # -ational, -tional, -ization, -fulness
    ("relational databases are conditional", "the relation of rational conditions"),
    ("generalizations of organizational hopefulness", "general organization and hopeful generalization"),
    # words of three letters or fewer are never stemmed; skies -> sky
    ("the sky was red and the sea was big", "skies are reds, seas are bigs"),
    # NLTK's irregular forms and step 1b
    ("dying lying tying skies news innings", "die lie tie sky news inning"),
    ("agreed feed plastered bled motoring sing", "agree feeding plaster bleed motor singing"),
    ("Generously, the organizers organized organizational meetings",
     "the organization generously organizes meetings"),
    # punctuation
    ("Hello, world! It's a well-known fact: e-mail (or email) is fast...",
     "hello world its well known email fast"),
    # digits
    ("In the 1990s there were 3,000 cars and 10th-place finishes", "The 1990 cars: 3000, 10th place."),
    # uppercase
    ("THE QUICK BROWN FOX", "the Quick brown DOG"),
    # non-ASCII letters are separators after Python's lower()
    ("caf\u00e9 r\u00e9sum\u00e9 na\u00efve", "cafe resume naive"),
    ("M\u00fcller \u00fcber die Stra\u00dfe", "Muller uber die Strasse"),
    ("\u6771\u4eac tokyo 2020 \u5e74", "tokyo 2020"),
    ("yes\u2014no\u2014maybe", "yes no maybe"),
    # the two characters whose lower() holds an ASCII letter: U+0130 -> i + U+0307, U+212A -> k
    ("\u0130stanbul is 300\u212a warm", "istanbul is 300k warm"),
    ("tab\tseparated\u00a0nbsp text", "tab separated nbsp text"),
    ("great job \U0001f44d team", "great team job"),
    # empty sides
    ("testing one two", ""),
    ("", "testing one two"),
    ("", ""),
    ("w1 w2 w3", "... !!! ---"),
    # repeated n-grams
    ("the the the cat cat", "the the cat the cat cat"),
    ("a b a b a b", "a b a b"),
    # several lines (rougeLsum): blank lines, a trailing newline, whitespace-only and
    # punctuation-only lines, CRLF
    ("the cat sat on the mat.\nthe dog barked at the cat.", "the dog sat on the mat.\nthe cat barked."),
    ("first line here\n\nsecond line here\n", "second line here\n\n\nfirst line"),
    ("one two three\n", "one two three\n"),
    ("alpha beta\n   \ngamma", "gamma\n \nalpha beta"),
    ("alpha beta\n---\ngamma delta", "gamma delta\n...\nalpha"),
    ("one two\r\nthree four\r\n", "three four\r\none two"),
    ("a b c a b c\na b c", "a b c\na b c a"),
    ("police killed the gunman\nthe gunman was shot\nno one else was hurt",
     "the gunman was killed by police\nno one was hurt\npolice shot him"),
    ("w1 w2 w3 w4 w5", "w1 w2 w6 w7 w8\nw1 w3 w8 w9 w5"),
]

# numpy.percentile (method "linear") references: (values, q).
PERCENTILE_ARRAYS = [
    [3.0],
    [1.0, 2.0],
    [0.5, 0.1, 0.9, 0.3],
    [0.2, 0.7, 0.7, 0.1, 0.95, 0.33, 0.61],
    [i / 7 for i in range(11)],
]
# (100·δ and 100·(1 − δ) with δ = (1 − 0.95) / 2 are the q that rouge-score passes: 2.500000000000002, 97.5)
PERCENTILE_QS = [0.0, 2.5, 100 * ((1 - 0.95) / 2), 5.0, 25.0, 33.3, 50.0, 100 * (1 - (1 - 0.95) / 2), 100.0]

# Porter's paper's examples and NLTK's own, always in the word list.
PORTER_EXAMPLES = """
caresses ponies ties caress cats feed agreed plastered bled motoring sing conflated troubled sized
hopping tanned falling hissing fizzed failing filing happy sky relational conditional rational
valenci hesitanci digitizer conformabli radicalli differentli vileli analogousli vietnamization
predication operator feudalism decisiveness hopefulness callousness formaliti sensitiviti
sensibiliti triplicate formative formalize electriciti electrical hopeful goodness revival
allowance inference airliner gyroscopic adjustable defensible irritant replacement adjustment
dependent adoption homologou communism activate angulariti homologous effective bowdlerize
probate rate cease controll roll dies flies died spied enjoy enjoyment spy fly try tries tried
geology archaeology theology skies dying lying tying news innings inning outings outing cannings
canning howe proceed exceed succeed generously generalization generalizations organizational
running runs ran run y yy yyy yyyy yyyyy say says saying syzygy toy toys a an as is us i ow owed
owing ia iing ied eed ees ies sses ss s logi ology alli bli abli fulli ably
""".split()

SUFFIXES = """
sses ies ss s eed ied ed ing at bl iz y ational tional enci anci izer bli abli alli entli eli ousli
ization ation ator alism iveness fulness ousness aliti iviti biliti fulli logi icate ative alize
iciti ical ful ness al ance ence er ic able ible ant ement ment ent sion tion ou ism ate iti ous ive
ize e ll
""".split()


def cpp_string(text):
    """A C++ string literal for the UTF-8 bytes of text (octal escapes: they stop at 3 digits)."""
    out = []
    for b in text.encode("utf-8"):
        c = chr(b)
        if c == "\\":
            out.append("\\\\")
        elif c == '"':
            out.append('\\"')
        elif c == "\n":
            out.append("\\n")
        elif c == "\r":
            out.append("\\r")
        elif c == "\t":
            out.append("\\t")
        elif 0x20 <= b < 0x7F:
            out.append(c)
        else:
            out.append("\\%03o" % b)
    return '"' + "".join(out) + '"'


def book_words(books):
    words = set()
    for path in sorted(glob.glob(os.path.join(books, "*.txt"))):
        with open(path, encoding="utf-8", errors="replace") as f:
            words.update(re.findall(r"[a-z0-9]+", f.read().lower()))
    return words


def porter_sample(words, per_suffix=45):
    """Up to per_suffix words for each suffix (in an order fixed by a hash), plus short words,
    digits and the fixed examples."""
    def spread(w):
        return hashlib.sha1(w.encode()).hexdigest()

    ordered = sorted(words, key=spread)
    chosen = set(PORTER_EXAMPLES)
    for suffix in SUFFIXES:
        chosen.update([w for w in ordered if w.endswith(suffix) and len(w) > len(suffix)][:per_suffix])
    chosen.update([w for w in ordered if len(w) <= 4][:150])
    chosen.update([w for w in ordered if re.search(r"[0-9]", w)][:60])
    chosen.update([w for w in ordered if "y" in w[:-1]][:80])
    return sorted(chosen)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rouge-dir", required=True, help="the folder that holds google-research's rouge/ package")
    ap.add_argument("--books", default=os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "data", "books"))
    ap.add_argument("--porter-out", help="where to write the word<TAB>stem file")
    args = ap.parse_args()

    sys.path.insert(0, os.path.abspath(args.rouge_dir))
    import nltk
    import numpy as np
    from nltk.stem import porter
    from rouge import rouge_scorer

    if args.porter_out:
        stemmer = porter.PorterStemmer()
        words = porter_sample(book_words(args.books))
        with open(args.porter_out, "w", encoding="utf-8") as f:
            f.write("# word<TAB>stem by NLTK %s PorterStemmer() (mode %s), %d words: the book words "
                    "sampled by tests/eval/make_rouge_reference.py\n" % (nltk.__version__, stemmer.mode, len(words)))
            for w in words:
                f.write("%s\t%s\n" % (w, stemmer.stem(w)))
        print("// %d words written to %s" % (len(words), args.porter_out))

    types = ["rouge1", "rouge2", "rougeL", "rougeLsum"]
    print("// rouge-score cases: target, prediction, use_stemmer, then precision/recall/fmeasure of %s"
          % ", ".join(types))
    for target, prediction in CASES:
        for stem in (False, True):
            scores = rouge_scorer.RougeScorer(types, use_stemmer=stem).score(target, prediction)
            numbers = ", ".join(repr(float(x)) for t in types for x in scores[t])
            print("    {%s, %s, %s, {%s}}," % (cpp_string(target), cpp_string(prediction),
                                              "true" if stem else "false", numbers))

    print("// numpy %s percentile (linear) at q = {%s}: values, then the percentile at each q"
          % (np.__version__, ", ".join(repr(q) for q in PERCENTILE_QS)))
    for values in PERCENTILE_ARRAYS:
        results = ", ".join(repr(float(np.percentile(values, q))) for q in PERCENTILE_QS)
        print("    {{%s}, {%s}}," % (", ".join(repr(v) for v in values), results))


if __name__ == "__main__":
    main()
