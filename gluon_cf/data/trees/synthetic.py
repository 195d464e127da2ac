"""A synthetic SST-like treebank, since no real treebank can be downloaded here: sentences from a
small polarity lexicon with negators and intensifiers, parsed into trees of a chosen shape
(`SHAPES`), labelled by a hidden compositional rule so that structure matters; `binary_label`
maps the five sentiment classes to two."""
from __future__ import annotations

import numbers
from typing import Iterator, List, Optional, Tuple

import numpy as np

from .tree import Tree

SHAPES = ("balanced", "moderate", "sst", "linear")

# Polarity lexicon: word -> strength. Every other word scores 0.
POSITIVE = {"good": 1, "fun": 1, "charming": 1, "funny": 1, "moving": 1, "enjoyable": 1,
            "great": 2, "brilliant": 2, "excellent": 2, "masterpiece": 2}
NEGATIVE = {"bad": -1, "dull": -1, "boring": -1, "weak": -1, "tedious": -1,
            "awful": -2, "terrible": -2, "mess": -2, "worst": -2, "unwatchable": -2}
NEGATORS = ("not", "never", "n't")
INTENSIFIERS = ("very", "really")
NEUTRAL = ("the", "a", "film", "movie", "it", "'s", "is", "of", "and", "story", "this", "that",
           "director", "with", "in", "to", "as", "its", "cast", "plot", "about", "one", "-LRB-",
           "-RRB-", "characters", ",", ".", "--", "script", "1\\/2")
LEXICON = {**POSITIVE, **NEGATIVE}

# Token category probabilities (the rest is neutral filler).
_P_NEGATOR, _P_INTENSIFIER, _P_POLAR = 0.05, 0.05, 0.15
_P_SHORT = 0.03  # fraction of 1..3-token phrases, so single-token trees occur as in SST


def _score_label(score):
    """SST class of a node score: <= -3 -> 0, -2..-1 -> 1, 0 -> 2, 1..2 -> 3, >= 3 -> 4."""
    return 0 if score <= -3 else 1 if score < 0 else 2 if score == 0 else 3 if score < 3 else 4


def synthetic_treebank(num_trees: int, shape: str = "sst", seed: int = 0, *,
                       mean_length: float = 19.0, max_length: int = 55,
                       length: Optional[int] = None) -> List[Tree]:
    """Generate `num_trees` binary SST-like sentiment trees, deterministic per `seed`.

    Sentences: lengths follow a log-normal with mean `mean_length` (sigma 0.5, as in SST: mean
    ~19, max ~55), rounded and clipped to 1..`max_length`; 3% are short 1..3-token phrases. Pass
    `length` to give every tree exactly that many tokens instead. Tokens are drawn from a small
    built-in vocabulary: `POSITIVE` / `NEGATIVE` polar words with strengths 1 or 2, `NEGATORS`,
    `INTENSIFIERS` and `NEUTRAL` filler; each sentence leans positive or negative.
    The same seed gives the same sentences for every shape; only the bracketing differs.

    Shapes (EuroSys'18 recursion paper, Table 1), validated against `SHAPES`:

    * ``'balanced'``: complete binary bracketing (left half = ceil(n/2)), depth ceil(log2 n).
    * ``'sst'`` / ``'moderate'`` (aliases): random parse-like bracketing biased to
      right-branching: a span's left part is a single token with probability 1/2, else uniform
      in size.
    * ``'linear'``: fully left-branching chain ``(((w1 w2) w3) ...)``, depth n - 1.

    Hidden label rule, applied bottom-up to every node::

        score(leaf w)  = LEXICON.get(w, 0)
        score((L, R))  = -score(R)          if L is a leaf in NEGATORS
                         2 * score(R)       if L is a leaf in INTENSIFIERS
                         score(L) + score(R) otherwise
        label = 0 if score <= -3, 1 if -2..-1, 2 if 0, 3 if 1..2, 4 if score >= 3

    Negation and intensification apply only to a right sibling, so the same words under another
    bracketing can get another label.

    Example::

        >>> from gluon_cf.data import synthetic_treebank
        >>> trees = synthetic_treebank(3, shape="linear", seed=0, length=4)
        >>> [len(tree.leaves()) for tree in trees], [tree.depth() for tree in trees]
        ([4, 4, 4], [3, 3, 3])
        >>> synthetic_treebank(3, shape="linear", seed=0, length=4) == trees   # deterministic
        True
    """
    if isinstance(num_trees, bool) or not isinstance(num_trees, numbers.Integral) or num_trees < 0:
        raise ValueError(f"synthetic_treebank: num_trees must be an int >= 0, got {num_trees!r}")
    if shape not in SHAPES:
        raise ValueError(f"synthetic_treebank: unknown shape {shape!r}; valid shapes are "
                         + ", ".join(repr(s) for s in SHAPES))
    if length is not None and (not isinstance(length, numbers.Integral) or length < 1):
        raise ValueError(f"synthetic_treebank: length must be an int >= 1 or None, got {length!r}")
    if not mean_length > 0 or not max_length >= 1:
        raise ValueError("synthetic_treebank: need mean_length > 0 and max_length >= 1, got "
                         f"mean_length={mean_length!r}, max_length={max_length!r}")
    word_seed, shape_seed = np.random.SeedSequence(seed).spawn(2)
    lengths, words = _sample_sentences(int(num_trees), np.random.default_rng(word_seed),
                                       mean_length, max_length, length)
    rng = np.random.default_rng(shape_seed)
    trees, start = [], 0
    for n in lengths:
        trees.append(_build_tree(words[start:start + n], shape, rng))
        start += n
    return trees


def _sample_sentences(num_trees, rng, mean_length, max_length, length):
    sigma = 0.5
    if length is None:
        # Aim the long sentences so that, mixed with the short phrases (mean 2), the mean is right.
        long_mean = max(mean_length - 2 * _P_SHORT, 1.0) / (1 - _P_SHORT)
        mu = np.log(long_mean) - sigma ** 2 / 2
        lengths = np.clip(np.rint(rng.lognormal(mu, sigma, num_trees)), 1, max_length)
        short = rng.random(num_trees) < _P_SHORT
        lengths[short] = rng.integers(1, 4, num_trees)[short]
        lengths = lengths.astype(np.int64)
    else:
        lengths = np.full(num_trees, int(length), dtype=np.int64)
    total = int(lengths.sum())
    p_positive = np.repeat(rng.uniform(0.1, 0.9, num_trees), lengths)
    u = rng.random(total)
    table = (NEUTRAL, tuple(POSITIVE), tuple(NEGATIVE), NEGATORS, INTENSIFIERS)
    polar = np.where(rng.random(total) < p_positive, 1, 2)
    category = np.select(
        [u < _P_NEGATOR, u < _P_NEGATOR + _P_INTENSIFIER,
         u < _P_NEGATOR + _P_INTENSIFIER + _P_POLAR], [3, 4, polar], 0)
    choice = (rng.random(total) * np.array([len(t) for t in table])[category]).astype(np.int64)
    words = [table[c][i] for c, i in zip(category.tolist(), choice.tolist())]
    return lengths.tolist(), words


def _build_tree(words, shape, rng):
    """Bracket `words` by `shape` and label every node by the hidden rule (iteratively)."""
    n = len(words)
    # Random splits for the sst-like shapes only (the others split by rule).
    coins: Iterator[float] = iter(rng.random(2 * n).tolist() if shape in ("sst", "moderate")
                                  else [])
    done: List[Tuple[Tree, int]] = []  # (tree, score) of finished subtrees, parent not built
    # (lo, hi, split); split None = not yet expanded
    stack: List[Tuple[int, int, Optional[int]]] = [(0, n, None)]
    while stack:
        lo, hi, split = stack.pop()
        if hi - lo == 1:
            word = words[lo]
            score = LEXICON.get(word, 0)
            done.append((Tree._new(_score_label(score), word, []), score))
        elif split is None:
            if shape == "balanced":
                split = lo + (hi - lo + 1) // 2
            elif shape == "linear":
                split = hi - 1
            elif next(coins) < 0.5:
                split = lo + 1
            else:
                split = lo + 1 + int(next(coins) * (hi - lo - 1))
            stack += [(lo, hi, split), (split, hi, None), (lo, split, None)]
        else:
            right, right_score = done.pop()
            left, left_score = done.pop()
            if left.word in NEGATORS:
                score = -right_score
            elif left.word in INTENSIFIERS:
                score = 2 * right_score
            else:
                score = left_score + right_score
            done.append((Tree._new(_score_label(score), None, [left, right]), score))
    return done[0][0]


def binary_label(label: int) -> Optional[int]:
    """SST-2 label of a 5-class SST label: 0, 1 -> 0; 3, 4 -> 1; 2 (neutral) -> None (excluded).

    >>> from gluon_cf.data import binary_label
    >>> [binary_label(label) for label in range(5)]
    [0, 0, None, 1, 1]
    """
    if isinstance(label, bool) or not isinstance(label, numbers.Integral) or not 0 <= label <= 4:
        raise ValueError(f"binary_label: expected an SST label in 0..4, got {label!r}")
    return None if label == 2 else int(label >= 3)