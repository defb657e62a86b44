"""Names of the internal and output columns, in one place.

Internal columns start with an underscore so they never collide with a user's
input columns; output columns are the contract (docs/design.md, README).
"""

# Internal (never written to kept/)
DOC_ID = "_id"  # the input id, input type; the node key of every stage
TEXT = "_text"  # the input text column, renamed
LENGTH = "_len"  # characters in the original text (survivor policy "longest")
RANK = "_rank"  # survivor.column value (policies "earliest" / "quality")
PRIORITY = "_priority"  # survivor.priority position of the document's value (policy "priority")
TEXT_HASH = "_thash"  # 128-bit hash of the normalized text, as two int64 columns
TEXT_HASH_LO = "_thash_lo"
SIG = "_sig"  # MinHash signature: num_perm little-endian uint32 slots, binary
BAND_KEYS = "_bands"  # binary: one little-endian int64 key per band (signatures.band_keys_of)
BAND_KEY = "_band_key"
SRC = "src"  # edge endpoints (GraphFrames' names)
DST = "dst"
SIMILARITY = "similarity"
COMPONENT = "_component"
BUCKET_SIZE = "_bucket_size"  # documents in a band row's bucket
BUCKET_MIN = "_bucket_min"  # the smallest id of a band row's bucket
STAR = "_star"  # a candidate edge from a large bucket's smallest id (a star's centre)
GROUP = "_group"  # verification: the edge source a row's text is sent to
PART = "_part"  # verification: the part of a large group (a star spread over tasks) a row is in
SIG_A = "_sig_a"  # signature verification: the two ends' signatures
SIG_B = "_sig_b"
REP = "_rep"  # exact-duplicate representative of a document
COPIES = "_copies"  # exact copies of a representative (its group's size - 1)
KEPT_ID = "_kept_id"
SAMPLE_KEY = "_sample_key"  # tune: the MinHash value that orders documents into the sample
# UTF-8 bytes of a document's text: in the signed rows (what texts collected to the driver
# are budgeted in) and tune's sample
BYTES = "_bytes"
FROM_INDEX = "_from_index"  # dedup --against: a node is an indexed document (kept before any other)
DOC_NO = "_n"  # the index: a document's number within its segment (band-key rows point to it)
SEGMENT = "_seg"  # the index: a segment's position in the manifest
BAND = "band"  # the index: the partition column of band-key files (band=0, band=1, ...)
INDEX_ID = "_index_id"  # dedup --against: the indexed end of a candidate edge

# Outputs (the contract)
ID = "id"
CLUSTER_ID = "cluster_id"
KEPT = "kept"
STATUS = "status"
REASON = "reason"
MATCHED_INDEX_ID = "matched_index_id"  # dedup --against: the indexed document a removed row matched

STATUS_UNIQUE = "unique"
STATUS_KEPT = "kept"
STATUS_EXACT = "exact_duplicate"
STATUS_NEAR = "near_duplicate"
STATUS_REJECTED = "rejected"
