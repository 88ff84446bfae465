"""PEP 517/660 backend: setuptools where it can build wheels, else a plain one.

pip's default build isolation installs `requires` from an index into a fresh
environment. This package requires nothing there, so `pip install ./python`
never needs a network:
  - when isolation hides the installed setuptools, the interpreter's
    site-packages are put back on the path;
  - setuptools builds the wheel when it can (setuptools >= 70.1, or the
    `wheel` package beside an older one);
  - otherwise this file writes the wheel itself: the tcuda package and the
    bundled libtcuda (found as setup.py finds it), nothing else.
Editable installs (`pip install -e ./python`) and sdists are always this
file's own, so they need neither setuptools nor `wheel`:
  - the editable wheel holds a .pth file whose import puts a finder for
    the `tcuda` package of this source tree on sys.meta_path (only `tcuda`
    becomes importable, not setup.py or a build/ folder); the package then
    loads the repository's build/src/libtcuda.so, or TCUDA_LIBRARY;
  - the sdist holds what building a wheel needs: pyproject.toml, setup.py,
    README.md, _build/ and the package's sources (no library).
"""
import base64
import hashlib
import importlib.util
import io
import os
import re
import site
import sys
import sysconfig
import tarfile
import zipfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _import_setuptools():
    try:
        from setuptools import build_meta
        return build_meta
    except ImportError:
        pass
    for p in site.getsitepackages() + [site.getusersitepackages()]:
        if p not in sys.path:
            sys.path.append(p)
    try:
        from setuptools import build_meta
        return build_meta
    except ImportError:
        return None


def _can_build_wheels():
    for mod in ("setuptools.command.bdist_wheel", "wheel.bdist_wheel"):
        try:
            if importlib.util.find_spec(mod):
                return True
        except ImportError:
            pass
    return False


_meta = _import_setuptools()
_USE_SETUPTOOLS = _meta is not None and _can_build_wheels() and os.environ.get("TCUDA_PLAIN_WHEEL") != "1"


def get_requires_for_build_wheel(config_settings=None):
    return []


def _pyproject(key):
    with open(os.path.join(HERE, "pyproject.toml")) as f:
        return re.search(r'^%s\s*=\s*"([^"]+)"' % re.escape(key), f.read(), re.M).group(1)


def _version():
    return _pyproject("version")


def _metadata():
    """Core metadata (METADATA in a wheel, PKG-INFO in an sdist)."""
    return ("Metadata-Version: 2.1\nName: tcuda\nVersion: %s\nSummary: %s\nLicense: BSD-3-Clause\n"
            "Requires-Python: %s\n" % (_version(), _pyproject("description"), _pyproject("requires-python")))


def _find_library():
    spec = importlib.util.spec_from_file_location("tcuda_setup", os.path.join(HERE, "setup.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.find_library()


def _record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (arcname, digest, len(data))


def _dist_info():
    return "tcuda-%s.dist-info" % _version()


def _dist_info_files(tag, purelib):
    info = _dist_info()
    return [(info + "/METADATA", _metadata().encode()),
            (info + "/WHEEL", ("Wheel-Version: 1.0\nGenerator: tcuda_build\nRoot-Is-Purelib: %s\nTag: %s\n"
                               % ("true" if purelib else "false", tag)).encode()),
            (info + "/top_level.txt", b"tcuda\n")]


def _write_wheel(wheel_directory, tag, files, purelib):
    """A wheel of files [(arcname, bytes)] plus its .dist-info; returns its name."""
    files = list(files) + _dist_info_files(tag, purelib)
    info = _dist_info()
    record = [_record_line(a, d) for a, d in files] + [info + "/RECORD,,"]
    files.append((info + "/RECORD", ("\n".join(record) + "\n").encode()))
    wheel = "tcuda-%s-%s.whl" % (_version(), tag)
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel), "w", zipfile.ZIP_DEFLATED) as z:
        for arcname, data in files:
            z.writestr(arcname, data)
    return wheel


def _package_sources():
    pkg = os.path.join(HERE, "tcuda")
    return [name for name in sorted(os.listdir(pkg)) if name.endswith(".py") or name == "_torch_glue.cpp"]


def _setup_module():
    """The extra files (the torch hook's .pth, tcuda.h); needs no setuptools."""
    spec = importlib.util.spec_from_file_location("tcuda_extras", os.path.join(HERE, "_build", "tcuda_extras.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _plain_wheel(wheel_directory):
    lib = _find_library()
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    files = []
    for name in _package_sources():
        with open(os.path.join(HERE, "tcuda", name), "rb") as f:
            files.append(("tcuda/" + name, f.read()))
    setup_mod = _setup_module()
    files.append(setup_mod.HOOK_PTH)
    for name, path in setup_mod.header_files():
        with open(path, "rb") as f:
            files.append(("tcuda/" + name, f.read()))
    if lib:
        sys.stderr.write("tcuda build: bundling %s\n" % os.path.realpath(lib))
        with open(os.path.realpath(lib), "rb") as f:
            files.append(("tcuda/libtcuda.so", f.read()))
    else:
        sys.stderr.write("tcuda build: WARNING: no libtcuda to bundle; at run time set "
                         "TCUDA_LIBRARY=/path/to/libtcuda.so\n")
    return _write_wheel(wheel_directory, "py3-none-" + plat, files, purelib=False)


# ---- editable installs (PEP 660) ----

_FINDER = '''"""tcuda installed in editable mode: `import tcuda` loads the package
in %(src)s (pip install -e); nothing else from that folder is importable."""
import importlib.machinery
import sys

_SOURCE = %(src)r


class TcudaEditableFinder:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name != "tcuda":
            return None
        return importlib.machinery.PathFinder.find_spec(name, [_SOURCE])


if not any(getattr(f, "__name__", "") == "TcudaEditableFinder" for f in sys.meta_path):
    sys.meta_path.append(TcudaEditableFinder)
'''


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):
    info = _dist_info()
    os.makedirs(os.path.join(metadata_directory, info), exist_ok=True)
    for arcname, data in _dist_info_files("py3-none-any", purelib=True):
        with open(os.path.join(metadata_directory, arcname), "wb") as f:
            f.write(data)
    return info


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    finder = (_FINDER % {"src": HERE}).encode()
    files = [("_tcuda_editable_finder.py", finder), ("tcuda-editable.pth", b"import _tcuda_editable_finder\n"),
             _setup_module().HOOK_PTH]
    return _write_wheel(wheel_directory, "py3-none-any", files, purelib=True)


# ---- sdist ----

def get_requires_for_build_sdist(config_settings=None):
    return []


def build_sdist(sdist_directory, config_settings=None):
    base = "tcuda-%s" % _version()
    members = ["pyproject.toml", "setup.py", "README.md", "_build/tcuda_build.py", "_build/tcuda_extras.py"] + \
        ["tcuda/" + n for n in _package_sources()]
    name = base + ".tar.gz"

    epoch = os.environ.get("SOURCE_DATE_EPOCH")  # reproducible builds set it

    def add(tar, arcname, data, mtime):
        ti = tarfile.TarInfo(arcname)
        ti.size, ti.mode, ti.mtime = len(data), 0o644, int(epoch) if epoch else int(mtime)
        tar.addfile(ti, io.BytesIO(data))

    extras = _setup_module()
    # tcuda.h, for the glue tcuda.torch compiles at first use: the wheel
    # built from this sdist bundles it (header_files() finds it here)
    files = [(m, os.path.join(HERE, m)) for m in members] + [(extras.SDIST_HEADER, path)
                                                             for _, path in extras.header_files()]
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as tar:
        add(tar, base + "/PKG-INFO", _metadata().encode(), os.stat(os.path.join(HERE, "pyproject.toml")).st_mtime)
        for m, path in files:
            with open(path, "rb") as f:
                add(tar, base + "/" + m, f.read(), os.stat(path).st_mtime)
    return name


if _USE_SETUPTOOLS:
    build_wheel = _meta.build_wheel
    prepare_metadata_for_build_wheel = _meta.prepare_metadata_for_build_wheel
else:
    def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
        return _plain_wheel(wheel_directory)
