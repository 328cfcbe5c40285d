"""Names a package exports but loads on first use (PEP 562), so that importing the package
does not import what one of its names needs (torch, another stage)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_getattr(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` for `package`: `exports` maps a name to the module defining it."""

    def __getattr__(name: str) -> Any:
        if name in exports:
            return getattr(importlib.import_module(exports[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__


def callable_module(module: str, target: str) -> None:
    """Make the package `module` callable: `pkg(...)` calls `target` ("module:function").

    `torchdoctor.diagnose` and `torchdoctor.tune` are stage packages and also the Python API's
    functions (torchdoctor/api.py): once a submodule is imported Python binds its name on the
    parent package, so the package itself must answer the call. The target is imported on the
    first call only, by name, so the package does not import the API (which imports it).
    """
    import sys
    import types

    where, _, name = target.partition(":")

    class _CallableModule(types.ModuleType):
        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            return getattr(importlib.import_module(where), name)(*args, **kwargs)

    _CallableModule.__call__.__doc__ = f"Call {target} (see its docstring)."
    sys.modules[module].__class__ = _CallableModule
