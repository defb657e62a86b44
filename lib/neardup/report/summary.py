"""What report.html shows beyond report.json, gathered by `neardup.stages.report_figures`.

Plain data, small by construction: histograms are bin counts, the size distribution is
one row per distinct cluster size, and texts are capped at `TEXT_CHARS` characters.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

# Similarities are counted in BINS equal bins over [0, 1]; bin i holds [i/BINS, (i+1)/BINS)
# and the last bin also holds 1.0. The Spark stage computes the same expression. BIN_SLACK:
# 0.57 * 100 is 56.99999999999999 in floating point; 0.57 belongs in bin 57.
BINS = 100
BIN_SLACK = 1e-9
# Characters of each collected text (a 50 MB document shows its first TEXT_CHARS), and of
# the snippets of the largest clusters' kept documents.
TEXT_CHARS = 3000
SNIPPET_CHARS = 240
# The ten largest clusters; removed members shown per sample cluster.
LARGEST = 10
MEMBERS_PER_SAMPLE = 3


def bin_of(similarity: float) -> int:
    """The histogram bin of a similarity in [0, 1] (the definition the stage mirrors)."""
    return min(math.floor(similarity * BINS + BIN_SLACK), BINS - 1)


@dataclass(frozen=True)
class Histogram:
    counts: dict[int, int]  # bin -> values in it (empty bins left out)
    missing: int = 0  # null values (verify.method none)

    @property
    def total(self) -> int:
        return sum(self.counts.values())


@dataclass(frozen=True)
class Doc:
    id: Any  # the input id, in its input type
    status: str
    text: str | None  # the first TEXT_CHARS characters; None if not found in the input
    chars: int  # the whole text's length in characters
    similarity: float | None = None  # to its kept document (the guard's clusters/ column)


@dataclass(frozen=True)
class Cluster:
    kept: Doc
    size: int  # documents in the cluster, the kept one included
    removed: list[Doc] = field(default_factory=list)  # samples only: up to MEMBERS_PER_SAMPLE


@dataclass(frozen=True)
class Summary:
    statuses: dict[str, int]  # clusters/ rows per status
    sizes: dict[int, int]  # cluster size -> clusters of that size (1: documents without duplicates)
    edge_similarity: Histogram  # verified edges' similarity
    removed_similarity: Histogram | None  # removed documents' similarity to their kept one, if recorded
    largest: list[Cluster]  # the LARGEST largest clusters, largest first (ties: smallest kept id)
    samples: list[Cluster]  # report.sample_clusters clusters chosen by report.seed
