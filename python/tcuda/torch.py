"""tcuda as PyTorch's CUDA caching allocator, behind torch's own API.

    import tcuda.torch
    tcuda.torch.install()        # before torch's first CUDA allocation
    x = torch.empty(1 << 20, device="cuda")   # tcuda's memory
    torch.cuda.memory_stats()    # tcuda's stats, torch's keys (== tcuda.memory_stats())

Or, for scripts that cannot be edited: TCUDA_TORCH_ALLOCATOR=1 (the package's
.pth hook installs it right after `import torch`).

install() compiles a small C++ glue (_torch_glue.cpp) against the installed
torch with torch.utils.cpp_extension at first use and caches it (cache_dir()).
Importing this module does not import torch. See docs/python.md, "tcuda under
torch", for what works, what is refused and why.
"""
import contextlib
import hashlib
import os
import sys

from ._lib import lib as _lib, library_path

__all__ = ["install", "is_installed", "build", "cache_dir", "InstallError", "SUPPORTED_TORCH", "GLUE_SOURCE"]

# torch major.minor versions whose CUDAAllocator interface the glue implements.
SUPPORTED_TORCH = ("2.11",)

_HERE = os.path.dirname(os.path.abspath(__file__))
GLUE_SOURCE = os.path.join(_HERE, "_torch_glue.cpp")
_MODULE = None


class InstallError(RuntimeError):
    """tcuda could not become torch's allocator; the message says why."""


def _torch():
    try:
        import torch
    except ImportError as e:
        raise InstallError("tcuda.torch: torch is not installed (%s)" % e) from None
    return torch


def _check_version(torch):
    ver = torch.__version__.split("+")[0]
    mm = ".".join(ver.split(".")[:2])
    if mm not in SUPPORTED_TORCH:
        raise InstallError("tcuda.torch: torch %s is not supported (supported: %s): torch's allocator interface is "
                           "C++ and changes between releases; use tcuda.interop.use_in_torch() (malloc/free only) "
                           "with other versions" % (torch.__version__, ", ".join(SUPPORTED_TORCH)))
    return mm


def cache_dir():
    """Root of the glue build cache: $TCUDA_TORCH_CACHE, else
    $XDG_CACHE_HOME/tcuda/torch-glue, else ~/.cache/tcuda/torch-glue."""
    env = os.environ.get("TCUDA_TORCH_CACHE")
    if env:
        return os.path.abspath(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tcuda", "torch-glue")


def _headers():
    """(include dirs for tcuda.h and tcuda_version.h); tcuda_version.h may
    need generating (returned as None then)."""
    lib = os.path.realpath(library_path())
    cands = [os.path.join(_HERE, "include"),                                  # bundled in a wheel
             os.path.join(os.path.dirname(os.path.dirname(_HERE)), "include")]  # the source tree
    inc = next((d for d in cands if os.path.isfile(os.path.join(d, "tcuda.h"))), None)
    if inc is None:
        raise InstallError("tcuda.torch: cannot find tcuda.h (looked in %s); reinstall the package from the tcuda "
                           "repository" % ", ".join(cands))
    ver = next((d for d in (inc, os.path.join(os.path.dirname(os.path.dirname(lib)), "include"))
                if os.path.isfile(os.path.join(d, "tcuda_version.h"))), None)
    return inc, ver


def _key(torch, inc):
    h = hashlib.sha256()
    for path in (GLUE_SOURCE, os.path.join(inc, "tcuda.h")):
        with open(path, "rb") as f:
            h.update(f.read())
    lib = os.path.realpath(library_path())
    st = os.stat(lib)
    for part in (torch.__version__, str(torch.version.cuda), sys.version, lib, str(st.st_size), str(st.st_mtime_ns)):
        h.update(b"\0" + part.encode())
    return "torch%s-py%d%d-%s" % (torch.__version__.split("+")[0], sys.version_info[0], sys.version_info[1],
                                  h.hexdigest()[:16])


@contextlib.contextmanager
def _locked(path):
    import fcntl
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def build(verbose=False):
    """Compile the glue against the installed torch (or load it from the
    cache) and return it (install(), installed(), current_allocator_name());
    installs nothing, needs no GPU.
    Raises InstallError for a missing or unsupported torch, or a failed
    build."""
    global _MODULE
    if _MODULE is not None:
        return _MODULE
    torch = _torch()
    _check_version(torch)
    if torch.version.cuda is None:
        raise InstallError("tcuda.torch: this torch (%s) is built without CUDA" % torch.__version__)
    inc, ver_dir = _headers()
    key = _key(torch, inc)
    root = cache_dir()
    out = os.path.join(root, key)
    try:
        os.makedirs(out, mode=0o700, exist_ok=True)
    except OSError as e:
        raise InstallError("tcuda.torch: cannot create the build cache %s (%s); set TCUDA_TORCH_CACHE to a "
                           "writable directory" % (out, e)) from None
    if not os.access(out, os.W_OK):
        raise InstallError("tcuda.torch: the build cache %s is not writable; set TCUDA_TORCH_CACHE to a writable "
                           "directory" % out)
    incs = [inc]
    if ver_dir is None:
        gen = os.path.join(out, "gen")
        os.makedirs(gen, exist_ok=True)
        v = _lib.tcuda_version()
        with open(os.path.join(gen, "tcuda_version.h"), "w") as f:
            f.write("#ifndef TCUDA_VERSION_H\n#define TCUDA_VERSION_H\n#define TCUDA_VERSION_MAJOR %d\n"
                    "#define TCUDA_VERSION_MINOR %d\n#define TCUDA_VERSION_PATCH %d\n"
                    "#define TCUDA_VERSION_STRING \"%s\"\n#endif\n"
                    % (v // 10000, v // 100 % 100, v % 100, _lib.tcuda_version_string().decode()))
        incs.append(gen)
    elif ver_dir != inc:
        incs.append(ver_dir)
    lib = os.path.realpath(library_path())
    from torch.utils import cpp_extension
    with _locked(os.path.join(out, "build.lock")):
        try:
            # a plain shared library, not a Python module: no Python headers needed
            cpp_extension.load(
                name="tcuda_torch_glue", sources=[GLUE_SOURCE], extra_include_paths=incs,
                extra_cflags=["-O2", "-std=c++17"],
                # no .cu sources: this only keeps torch from asking a GPU for its arch
                extra_cuda_cflags=["-gencode=arch=compute_90,code=sm_90"],
                extra_ldflags=[lib, "-Wl,-rpath," + os.path.dirname(lib)],
                build_directory=out, with_cuda=True, verbose=verbose, is_python_module=False)
        except Exception as e:  # the compiler's output is in the message
            text = str(e)
            raise InstallError("tcuda.torch: building the glue in %s failed: %s" % (out, text[-4000:])) from None
    _MODULE = _Glue(os.path.join(out, "tcuda_torch_glue.so"))
    return _MODULE


class _Glue:
    """The built glue library (loaded by cpp_extension; ctypes finds the same instance)."""

    def __init__(self, path):
        import ctypes
        self.__file__ = path
        self._lib = ctypes.CDLL(path)
        self._lib.tcuda_glue_install.restype = ctypes.c_int
        self._lib.tcuda_glue_install.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        self._lib.tcuda_glue_installed.restype = ctypes.c_int
        self._lib.tcuda_glue_current_allocator.restype = ctypes.c_int
        self._lib.tcuda_glue_current_allocator.argtypes = [ctypes.c_char_p, ctypes.c_size_t]

    def install(self):
        import ctypes
        err = ctypes.create_string_buffer(1024)
        if self._lib.tcuda_glue_install(err, len(err)):
            raise RuntimeError(err.value.decode("utf-8", "replace"))

    def installed(self):
        return bool(self._lib.tcuda_glue_installed())

    def current_allocator_name(self):
        import ctypes
        buf = ctypes.create_string_buffer(256)
        self._lib.tcuda_glue_current_allocator(buf, len(buf))
        return buf.value.decode()

    def current_allocator_initialized(self):
        return self._lib.tcuda_glue_current_allocator(None, 0) == 1


def is_installed():
    """True once install() made tcuda torch's CUDA allocator."""
    return _MODULE is not None and _MODULE.installed()


_ORIG_SET_SETTINGS = None


def _device_keys(env):
    """The settings without torch's pinned-memory keys: pinned host memory
    stays torch's own allocator's under tcuda.torch."""
    parts, depth, cur = [], 0, ""
    for ch in env:  # commas inside [...] (roundup_power2_divisions) do not split
        depth += (ch == "[") - (ch == "]")
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return ",".join(p for p in parts if p.strip() and not p.strip().startswith("pinned_"))


def _patch_settings(torch):
    """torch.cuda.memory._set_allocator_settings also configures tcuda (torch
    keeps its own copy of the settings, which it reads elsewhere)."""
    global _ORIG_SET_SETTINGS
    mem = torch.cuda.memory
    if _ORIG_SET_SETTINGS is not None:
        return
    _ORIG_SET_SETTINGS = mem._set_allocator_settings
    from . import memory as tmem

    def _set_allocator_settings(env: str):
        _ORIG_SET_SETTINGS(env)
        tmem.set_allocator_settings(_device_keys(env))

    _set_allocator_settings.__doc__ = _ORIG_SET_SETTINGS.__doc__
    mem._set_allocator_settings = _set_allocator_settings


def install(verbose=False):
    """Make tcuda torch's CUDA caching allocator (idempotent). Call it
    before torch allocates CUDA memory. Raises InstallError when torch is
    missing or unsupported, the allocator configuration (TCUDA_ALLOC_CONF,
    else PYTORCH_CUDA_ALLOC_CONF, else PYTORCH_ALLOC_CONF) is not one tcuda
    runs, CUDA is not available, the glue does not build, or torch's
    allocator already holds memory."""
    if is_installed():
        return _MODULE
    torch = _torch()
    _check_version(torch)
    # a configuration tcuda cannot take would fail every allocation: say so now
    from . import memory as tmem
    try:
        tmem.get_allocator_settings()
    except RuntimeError as e:
        raise InstallError("tcuda.torch: the allocator configuration is not one tcuda can run: %s" % e) from None
    if torch.version.cuda is None or not torch.cuda.is_available():
        from ._device import unavailable_reason
        why = unavailable_reason()
        raise InstallError("tcuda.torch: CUDA is not available%s" % ((": " + why) if why else ""))
    if not _lib.tcuda_is_available():
        raise InstallError("tcuda.torch: CUDA is not available to libtcuda: %s"
                           % _lib.tcuda_unavailable_reason().decode())
    mod = build(verbose)
    try:
        mod.install()
    except RuntimeError as e:
        raise InstallError(str(e)) from None
    _patch_settings(torch)
    return mod
