"""neardup: near-duplicate detection for text corpora on Apache Spark."""

__version__ = "0.1.0"
