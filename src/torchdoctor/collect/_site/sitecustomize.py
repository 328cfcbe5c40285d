"""Instruments torchrun ranks: the launcher puts this folder on PYTHONPATH for its child.

Python imports `sitecustomize` at start-up in every process; this one acts only in a
distributed rank (RANK set) of an instrumented launch, and chains to any other
`sitecustomize` further down the path so a user's own one still runs.
"""

import importlib.machinery
import importlib.util
import os
import sys


def _chain() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        if os.path.abspath(entry or ".") == here:
            continue
        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", [entry])
        if spec is not None and spec.loader is not None:
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return


try:
    if os.environ.get("TORCHDOCTOR_COLLECT_CONFIG") and "RANK" in os.environ:
        from torchdoctor.collect._rank import install_for_rank

        install_for_rank()
finally:
    _chain()
