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


# Where tcuda.h sits in an sdist (beside pyproject.toml), so that a wheel
# built from the sdist alone still carries it.
SDIST_HEADER = "include/tcuda.h"


def header_files():
    """(name in the package, path): tcuda.h, which tcuda.torch compiles its glue
    against, from the repository or, in an unpacked sdist, from its own copy."""
    for path in (os.path.join(REPO, "include", "tcuda.h"), os.path.join(HERE, SDIST_HEADER)):
        if os.path.exists(path):
            return [("include/tcuda.h", path)]
    return []
