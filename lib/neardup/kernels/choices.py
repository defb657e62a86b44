"""The kernels' choices that the configuration checks: shingle units, MinHash methods and
decontamination's verification methods.

A module of their own, without numba, so that checking a config (the command line does
it before starting Spark) does not load the JIT; hashing.py and minhash.py use them from
here.
"""

UNITS = ("word", "char")  # shingle units (hashing.shingle_keys)
METHODS = ("classic", "oph")  # MinHash methods (minhash.signatures)
DECON_VERIFY = ("exact", "signature")  # decontamination's verification (contamination.VERIFY_METHODS)
