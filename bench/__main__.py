"""The benchmark command: neardup against the tools a user would pick instead, on generated
corpora (`synth`, and `realistic`: the lengths of held-out web text), scored against exact
ground truth.

    pip install -e '.[bench]'
    python -m bench --docs 100000 [--corpus synth,realistic]
                       [--tools neardup,rensa,rensa-mp,datasketch,datatrove,mllib,floor]
    python -m bench kernels [--docs 2000]     # microseconds per document to a signature
    python -m bench memory [--sweep]          # memory per stage, smallest heap
    python -m bench realtext                  # the guard on this machine's licences and docs
    python -m bench index [--docs 1000000]    # a batch against a persistent index
    python -m bench small [--repeat 5]        # the sample against a bare Spark start, jobs per stage
    python -m bench skew [--docs 100000]      # largest task / median task per stage, skewed corpus
    python -m bench scale [--docs 100000,1000000,10000000]  # Spark's metrics per stage; a billion
    python -m bench decontaminate [--e2e-docs 100000]  # decontamination's kernel and command
    python -m bench components [--edges 1000000,10000000]  # components' backends, local and standalone
    python -m bench ceiling [--docs 200000,1000000]  # peak memory per tool, the largest corpus it fits

Runs bench/e2e.py (bench/sign_kernels.py with `kernels`, bench/memory.py with `memory`, bench/realtext.py
with `realtext`, bench/index.py with `index`, bench/small.py with `small`, bench/skew.py with `skew`,
bench/scale.py with `scale`, bench/decontaminate.py with `decontaminate`, bench/components.py with
`components`, bench/ceiling.py with `ceiling`)
from a source checkout (the repository's root as the working directory); see
bench/README.md for what each tool runs and how it is measured.
"""

import runpy
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent

# The first argument names the benchmark; without one, the end-to-end comparison.
SCRIPTS = {
    "kernels": "sign_kernels.py",
    "memory": "memory.py",
    "realtext": "realtext.py",
    "index": "index.py",
    "small": "small.py",
    "skew": "skew.py",
    "scale": "scale.py",
    "decontaminate": "decontaminate.py",
    "components": "components.py",
    "ceiling": "ceiling.py",
}

if __name__ == "__main__":
    args = sys.argv[1:]
    script = "e2e.py"
    if args[:1] and args[0] in SCRIPTS:
        script, args = SCRIPTS[args[0]], args[1:]
    path = BENCH / script
    sys.path.insert(0, str(BENCH))
    sys.argv = [str(path), *args]
    runpy.run_path(str(path), run_name="__main__")
