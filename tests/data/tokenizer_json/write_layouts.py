#!/usr/bin/env python3
"""Writes tokenizer.json files in the layouts real checkpoints ship, from this project's own
SentencePiece model (examples/data/books-16k.model) and byte-level BPE (tests/data/hf/bpe).

The layouts follow what transformers writes (see README.md in this folder): its v4 converter
(convert_slow_tokenizer.py: SpmConverter/T5Converter, PegasusConverter, RobertaConverter) and
v5's TokenizersBackend classes. The SentencePiece model is read with a minimal protobuf reader
(no sentencepiece Python module is needed). Usage: write_layouts.py REPO_ROOT OUT_DIR
"""
import base64, json, os, struct, sys

def varint(b, i):
    v = s = 0
    while True:
        c = b[i]; i += 1
        v |= (c & 0x7F) << s; s += 7
        if c < 0x80: return v, i

def fields(b):
    i = 0
    while i < len(b):
        key, i = varint(b, i)
        f, w = key >> 3, key & 7
        if w == 0: v, i = varint(b, i)
        elif w == 1: v = b[i:i + 8]; i += 8
        elif w == 5: v = b[i:i + 4]; i += 4
        elif w == 2:
            n, i = varint(b, i); v = b[i:i + n]; i += n
        else: raise ValueError("wire type %d" % w)
        yield f, w, v

def read_spm(path):
    pieces, charsmap = [], b""
    for f, w, v in fields(open(path, "rb").read()):
        if f == 1:  # SentencePiece {1 piece, 2 score, 3 type}
            p = {"piece": "", "score": 0.0, "type": 1}
            for g, _, u in fields(v):
                if g == 1: p["piece"] = u.decode("utf-8")
                elif g == 2: p["score"] = struct.unpack("<f", u)[0]
                elif g == 3: p["type"] = u
            pieces.append(p)
        elif f == 3:  # NormalizerSpec {2 precompiled_charsmap}
            for g, _, u in fields(v):
                if g == 2: charsmap = u
    return pieces, charsmap

def added(content, id, special=True, normalized=False, lstrip=False, rstrip=False):
    return {"id": id, "content": content, "single_word": False, "lstrip": lstrip, "rstrip": rstrip,
            "normalized": normalized, "special": special}

def template(eos, eos_id):
    return {"type": "TemplateProcessing",
            "single": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": eos, "type_id": 0}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": eos, "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 0}}, {"SpecialToken": {"id": eos, "type_id": 0}}],
            "special_tokens": {eos: {"id": eos, "ids": [eos_id], "tokens": [eos]}}}

def doc(added_tokens, normalizer, pre, post, decoder, model):
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added_tokens,
            "normalizer": normalizer, "pre_tokenizer": pre, "post_processor": post, "decoder": decoder, "model": model}

def main():
    root, out = sys.argv[1], sys.argv[2]
    pieces, charsmap = read_spm(os.path.join(root, "examples/data/books-16k.model"))
    cm = base64.b64encode(charsmap).decode()
    vocab = [[p["piece"], p["score"]] for p in pieces]
    n = len(vocab)
    precompiled = {"type": "Precompiled", "precompiled_charsmap": cm}
    replace = {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}
    t5_added = [added("<pad>", 0), added("</s>", 1), added("<unk>", 2)] + \
               [added("<extra_id_%d>" % i, n + 99 - i) for i in range(99, -1, -1)]
    layouts = {}
    # T5 as transformers 4's converter wrote it (t5-small, long-t5-*): the old Metaspace fields.
    layouts["t5_v4"] = doc(t5_added, {"type": "Sequence", "normalizers": [precompiled, replace]},
        {"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"},
                                               {"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": True}]},
        template("</s>", 1), {"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": True},
        {"type": "Unigram", "unk_id": 2, "vocab": vocab})
    # T5 as a later converter writes it: the new Metaspace fields, Metaspace alone, no WhitespaceSplit.
    layouts["t5_v4_new_metaspace"] = doc(t5_added, {"type": "Sequence", "normalizers": [precompiled, replace]},
        {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
        template("</s>", 1), {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
        {"type": "Unigram", "unk_id": 2, "vocab": vocab, "byte_fallback": False})
    # T5 as transformers 5's T5Tokenizer builds it: no normalizer.
    layouts["t5_v5"] = doc(t5_added, None,
        {"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"},
            {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}]},
        template("</s>", 1), {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
        {"type": "Unigram", "unk_id": 2, "vocab": vocab, "byte_fallback": False})
    # Pegasus (PegasusConverter, offset 103): pad, eos, mask_1, mask_2, <unk_2>..<unk_102> at -100.
    off = 103
    pvocab = [["<pad>", 0.0], ["</s>", 0.0], ["<mask_1>", 0.0], ["<mask_2>", 0.0]] + \
             [["<unk_%d>" % i, -100.0] for i in range(2, off)] + vocab[2:]
    p_added = [added("<pad>", 0), added("</s>", 1), added("<mask_1>", 2), added("<mask_2>", 3)] + \
              [added("<unk_%d>" % i, i + 2) for i in range(2, off)] + [added("<unk>", off + 2)]
    layouts["pegasus"] = doc(p_added, {"type": "Sequence", "normalizers": [precompiled, replace]},
        {"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"},
                                               {"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": True}]},
        template("</s>", 1), {"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": True},
        {"type": "Unigram", "unk_id": off + 2, "vocab": pvocab})
    # BART/LED (RobertaConverter): byte-level BPE, merges as "a b" strings (tokenizers < 0.20) or pairs.
    bvocab = json.load(open(os.path.join(root, "tests/data/hf/bpe/vocab.json"), encoding="utf-8"))
    merges = [l for l in open(os.path.join(root, "tests/data/hf/bpe/merges.txt"), encoding="utf-8").read().split("\n")[1:] if l]
    bid = lambda s: bvocab[s]
    b_added = [added("<s>", bid("<s>")), added("<pad>", bid("<pad>")), added("</s>", bid("</s>")),
               added("<unk>", bid("<unk>")), added("<mask>", bid("<mask>"), lstrip=True)]
    roberta = {"type": "RobertaProcessing", "sep": ["</s>", bid("</s>")], "cls": ["<s>", bid("<s>")],
               "trim_offsets": True, "add_prefix_space": False}
    bl = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    def bpe(m):
        return {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                "vocab": bvocab, "merges": m}
    layouts["bart"] = doc(b_added, None, bl, roberta, bl, bpe(merges))
    layouts["bart_pairs"] = doc(b_added, None, bl, roberta, bl, bpe([m.split(" ") for m in merges]))
    for name, d in layouts.items():
        os.makedirs(os.path.join(out, name), exist_ok=True)
        with open(os.path.join(out, name, "tokenizer.json"), "w", encoding="utf-8") as f:
            json.dump(d, f, ensure_ascii=False, indent=2)

main()
