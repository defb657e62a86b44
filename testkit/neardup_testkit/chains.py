"""A corpus with planted chains: the over-merge guard's test input.

A *chain* starts from a random document and drifts: each step replaces a few words of
the previous step at random positions, so neighbours are near-duplicates while the ends
share almost nothing. Connected components join a whole chain into one cluster; the
guard must split it. *Stars* are ordinary near-duplicate clusters (a base and variants
of it, each a few edits away from the base) whose members the guard must leave alone;
*singles* are unrelated documents. Words are drawn uniformly from a large made-up
vocabulary, so unrelated documents share no word 5-gram.

Pure numpy + pyarrow, deterministic for its arguments. Columns: id (int64, shuffled and
sparse), text, kind ("chain", "star" or "single"), group (chain or star number, -1 for
singles), step (the step along the chain, 0 for a star's base, the variant number for
its variants).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa


@dataclass(frozen=True)
class ChainSpec:
    chains: int = 20
    steps: int = 20  # documents after the first: a chain has steps + 1
    chain_edits: int = 5  # words replaced per step (of `words`): J(neighbours) ~ 0.85 at 300 words
    stars: int = 40
    variants: int = 4  # per star, besides its base
    star_edits: int = 2  # words replaced in each variant, from the base: J ~ 0.93
    singles: int = 300
    words: int = 300
    vocabulary: int = 50_000
    seed: int = 5


def generate(spec: ChainSpec) -> pa.Table:
    rng = np.random.default_rng(spec.seed)
    vocab = np.array([f"w{i:05d}" for i in range(spec.vocabulary)])
    texts: list[np.ndarray] = []
    kind: list[str] = []
    group: list[int] = []
    step: list[int] = []

    def fresh() -> np.ndarray:
        return rng.integers(0, spec.vocabulary, spec.words)

    def edited(words: np.ndarray, edits: int) -> np.ndarray:
        out = words.copy()
        out[rng.choice(spec.words, edits, replace=False)] = rng.integers(0, spec.vocabulary, edits)
        return out

    for c in range(spec.chains):
        words = fresh()
        for s in range(spec.steps + 1):
            if s:
                words = edited(words, spec.chain_edits)
            texts.append(words)
            kind.append("chain")
            group.append(c)
            step.append(s)
    for g in range(spec.stars):
        base = fresh()
        for v in range(spec.variants + 1):
            texts.append(base if v == 0 else edited(base, spec.star_edits))
            kind.append("star")
            group.append(g)
            step.append(v)
    for _ in range(spec.singles):
        texts.append(fresh())
        kind.append("single")
        group.append(-1)
        step.append(0)
    n = len(texts)
    ids = rng.permutation(np.arange(n, dtype=np.int64) * 7 + 1_000)
    return pa.table(
        {
            "id": pa.array(ids),
            "text": pa.array([" ".join(vocab[w]) for w in texts]),
            "kind": pa.array(kind),
            "group": pa.array(group, pa.int64()),
            "step": pa.array(step, pa.int64()),
        }
    )
