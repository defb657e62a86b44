"""The vectorized UDF of `verify.endpoint_texts`' filter: a module of its own, imported only
where the filter runs, so that no other run imports pandas."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
from pyspark.broadcast import Broadcast
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from neardup.kernels.id_filter import may_contain


def may_be_in(payload: Broadcast[bytes]) -> Callable[[Column], Column]:
    """A UDF of a column of ids' `xxhash64`: may each id be in the set `payload` holds
    (kernels/id_filter.id_set)? Only the hashes go to Python; the rows wait in the JVM."""

    def test(hashes: pd.Series) -> pd.Series:
        return pd.Series(may_contain(payload.value, hashes.to_numpy()))

    return F.pandas_udf(test, T.BooleanType())  # type: ignore[call-overload]
