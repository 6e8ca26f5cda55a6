"""Packages made of family files (``nn.modules``, ``nn.functional``) re-export each family's ``__all__``."""
import importlib


def reexport(namespace: dict, package: str, families) -> None:
    """Import ``package.<family>`` for each family and copy the names in its ``__all__`` into ``namespace``."""
    for family in families:
        mod = importlib.import_module(f"{package}.{family}")
        for name in mod.__all__:
            namespace[name] = getattr(mod, name)
