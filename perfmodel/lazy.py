"""Lazy re-exports for the package's `__init__`: a public name's module is imported on first use,
so `import perfmodel` (and the CLI, which imports only the command it runs) does not pay for
numpy and the op models before something needs them (`perfmodel hw list` needs neither).

`perfmodel/__init__.py` names each public name's module in `EXPORTS` and gives the package this
module type. A function named like its module (`perfmodel.predict`, `perfmodel.hardware`) stays
the function when the import system binds the module of that name on the package, as it did when
`__init__` imported everything at once.
"""
from __future__ import annotations

import importlib
import types


class LazyPackage(types.ModuleType):
    """A package whose `EXPORTS` (public name -> module path; a module itself where the name is
    the module's) are imported on first attribute access."""

    def __getattr__(self, name: str):
        exports = self.__dict__.get("EXPORTS", {})
        if name not in exports:
            if name.startswith("__"):
                raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
            # a submodule (pm.engine), as when __init__ imported everything at once
            try:
                return importlib.import_module(f"{self.__name__}.{name}")
            except ModuleNotFoundError as e:
                if e.name != f"{self.__name__}.{name}":
                    raise
                raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}") \
                    from None
        module = importlib.import_module(exports[name])
        value = module if module.__name__ == f"{self.__name__}.{name}" and not hasattr(
            module, name) else getattr(module, name)
        super().__setattr__(name, value)
        return value

    def __setattr__(self, name: str, value) -> None:
        exports = self.__dict__.get("EXPORTS", {})
        if (isinstance(value, types.ModuleType) and exports.get(name) == value.__name__
                and hasattr(value, name)):
            value = getattr(value, name)  # pm.predict is the function, not its module
        super().__setattr__(name, value)

    def __dir__(self) -> list[str]:
        return sorted(set(self.__dict__) | set(self.__dict__.get("EXPORTS", {})))
