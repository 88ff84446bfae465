"""TCUDA_TORCH_ALLOCATOR=1: make tcuda torch's CUDA allocator as soon as torch
is imported, for scripts that cannot be edited.

The package's tcuda-torch-hook.pth imports this module at interpreter start
when the variable is set (to anything but "" or "0"). torch is not imported
here: a finder on sys.meta_path waits for the script's own `import torch` and
runs tcuda.torch.install() right after torch's module has run. Values: "1"
turns it on; any other value makes `import torch` raise InstallError. A
failed install raises from `import torch` too: the user asked for tcuda.
Importing this module by hand (`import tcuda.torch_hook`) does the same.
"""
import importlib.abc
import os
import sys

ENV = "TCUDA_TORCH_ALLOCATOR"


def _wanted():
    return os.environ.get(ENV, "") not in ("", "0")


class _Loader(importlib.abc.Loader):
    def __init__(self, inner):
        self._inner = inner

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        self._inner.exec_module(module)
        _install()

    def __getattr__(self, name):  # get_resource_reader, is_package, ...
        return getattr(self._inner, name)


class _TorchFinder(importlib.abc.MetaPathFinder):
    """Finds `torch` through the other finders and wraps its loader."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        _remove()
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if find is None:
                continue
            spec = find(name, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _Loader(spec.loader)
                return spec
        return None


def _remove():
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _TorchFinder)]


def _install():
    from .torch import InstallError, install
    v = os.environ.get(ENV, "")
    if v != "1":  # raised here, where the user sees it, not at interpreter start
        raise InstallError("tcuda.torch: %s=%r: use 1 (tcuda under torch) or 0/unset (torch's own allocator)"
                           % (ENV, v))
    install()


def _arm():
    if not _wanted():
        return
    if "torch" in sys.modules:
        _install()
    elif not any(isinstance(f, _TorchFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _TorchFinder())


_arm()
