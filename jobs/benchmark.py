"""The benchmark command: neardup against the tools a user would pick instead, on generated
corpora (`synth`, and `realistic`: the lengths of held-out web text), scored against exact
ground truth.

    pip install -e '.[bench]'
    python jobs/benchmark.py --docs 100000 [--corpus synth,realistic]
                             [--tools neardup,rensa,rensa-mp,datasketch,datatrove,mllib,floor]
    python jobs/benchmark.py kernels [--docs 2000]     # microseconds per document to a signature
    python jobs/benchmark.py memory [--sweep]          # memory per stage, smallest heap
    python jobs/benchmark.py realtext                  # the guard on this machine's licences and docs
    python jobs/benchmark.py index [--docs 1000000]    # a batch against a persistent index
    python jobs/benchmark.py small [--repeat 5]        # the sample against a bare Spark start, jobs per stage
    python jobs/benchmark.py skew [--docs 100000]      # largest task / median task per stage, skewed corpus
    python jobs/benchmark.py scale [--docs 100000,1000000,10000000]  # Spark's metrics per stage; a billion

Runs bench/e2e.py (bench/sign_kernels.py with `kernels`, bench/memory.py with `memory`, bench/realtext.py
with `realtext`, bench/index.py with `index`, bench/small.py with `small`, bench/skew.py with `skew`,
bench/scale.py with `scale`)
from a source checkout; see
bench/README.md for what each tool runs and how it is measured.
"""

import runpy
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench"

if __name__ == "__main__":
    args = sys.argv[1:]
    script = "e2e.py"
    if args[:1] == ["kernels"]:
        script, args = "sign_kernels.py", args[1:]
    elif args[:1] == ["memory"]:
        script, args = "memory.py", args[1:]
    elif args[:1] == ["realtext"]:
        script, args = "realtext.py", args[1:]
    elif args[:1] == ["index"]:
        script, args = "index.py", args[1:]
    elif args[:1] == ["small"]:
        script, args = "small.py", args[1:]
    elif args[:1] == ["skew"]:
        script, args = "skew.py", args[1:]
    elif args[:1] == ["scale"]:
        script, args = "scale.py", args[1:]
    path = BENCH / script
    if not path.is_file():
        sys.exit(f"benchmark: {path} not found; run from a source checkout of neardup")
    sys.path.insert(0, str(BENCH))
    sys.argv = [str(path), *args]
    runpy.run_path(str(path), run_name="__main__")
