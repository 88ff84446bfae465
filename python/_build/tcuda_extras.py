"""Files every kind of install carries besides the package's modules (read
by setup.py and tcuda_build.py; needs nothing but the standard library)."""
import os

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(HERE)

# Turns tcuda on under torch at `import torch` when TCUDA_TORCH_ALLOCATOR is
# set (tcuda/torch_hook.py); reads one variable otherwise.
HOOK_PTH = ("tcuda-torch-hook.pth",
            b"import os; os.environ.get('TCUDA_TORCH_ALLOCATOR', '') not in ('', '0') and "
            b"__import__('tcuda.torch_hook')\n")


def header_files():
    """(name in the package, path): tcuda.h, which tcuda.torch compiles its glue against."""
    path = os.path.join(REPO, "include", "tcuda.h")
    return [("include/tcuda.h", path)] if os.path.exists(path) else []
