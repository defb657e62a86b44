"""Loading the kernels' compiled code ahead of the stages that call them: a worker of the
warm-up job (stages/warmup.py) and the daemon that forks a local run's workers
(runtime/pydaemon.py) sign two made-up documents and score them as exact verification does."""

from __future__ import annotations

import pyarrow as pa

from neardup import columns as C
from neardup.kernels.signatures import SignParams

# One text long enough for word shingles and one short enough for character shingles, so
# both ways of shingling are loaded.
_TEXTS = ["the warm up document of several words", "warm"]


def load_kernels(params: SignParams, keep_signatures: bool, exact: bool) -> int:
    """Sign the made-up documents (and with `exact`, score them as verification scores a
    group), which loads the compiled code of the kernels those call; the rows they returned.
    The code loaded depends on the arguments' types, not on the parameters' values."""
    from neardup.kernels.scoring import score_groups
    from neardup.kernels.signatures import sign_batch

    ids, texts = pa.array([1, 2], pa.int64()), pa.array(_TEXTS)
    n = len(sign_batch(pa.record_batch({C.DOC_ID: ids, C.TEXT: texts}), params, keep_signatures))
    if exact:
        # One group: document 1 and its one edge, to document 2.
        group = pa.record_batch({C.GROUP: pa.array([1, 1], pa.int64()), C.DOC_ID: ids, C.TEXT: texts})
        n += sum(len(b) for b in score_groups([group], params, 0.0))
    return n
