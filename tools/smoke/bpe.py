"""A byte-level BPE trainer and encoder with the semantics of a Hugging Face tokenizer.json
BPE model: text is split by the pre-tokenizer pattern, each piece is mapped to the GPT-2 byte
alphabet, and merges are applied lowest rank first."""
import collections
import sys
import os

import regex

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "bench"))
import standin_sidefiles  # noqa: E402

# The pre-tokenizer patterns of the real families (their tokenizer.json files).
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
                 r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
GPT2_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"


# GPT-2's byte alphabet, as the bench's stand-in tokenizers build it (one table in the repo).
BYTE_TO_CHAR = dict(enumerate(standin_sidefiles.byte_alphabet()))


def pieces(text, pattern):
    return ["".join(BYTE_TO_CHAR[b] for b in piece.encode("utf-8")) for piece in regex.findall(pattern, text)]


def train(text, pattern, num_merges):
    """Most frequent adjacent pair first; ties go to the lexicographically smallest pair so
    the merges are the same on every run."""
    words = collections.Counter(tuple(piece) for piece in pieces(text, pattern))
    merges = []
    for _ in range(num_merges):
        pair_counts = collections.Counter()
        for word, count in words.items():
            for pair in zip(word, word[1:]):
                pair_counts[pair] += count
        if not pair_counts:
            break
        best = min(pair_counts, key=lambda pair: (-pair_counts[pair], pair))
        merges.append(best)
        merged_words = collections.Counter()
        for word, count in words.items():
            merged_words[merge_pair(word, best)] += count
        words = merged_words
    return merges


def merge_pair(word, pair):
    out = []
    i = 0
    while i < len(word):
        if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
            out.append(word[i] + word[i + 1])
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)


def build_vocab(merges):
    vocab = {BYTE_TO_CHAR[b]: b for b in range(256)}
    for left, right in merges:
        vocab.setdefault(left + right, len(vocab))
    return vocab


def encode(text, pattern, merges, vocab):
    ranks = {pair: rank for rank, pair in enumerate(merges)}
    ids = []
    for piece in pieces(text, pattern):
        word = tuple(piece)
        while len(word) > 1:
            ranked = [(ranks[p], p) for p in zip(word, word[1:]) if p in ranks]
            if not ranked:
                break
            word = merge_pair(word, min(ranked)[1])
        ids.extend(vocab[symbol] for symbol in word)
    return ids
