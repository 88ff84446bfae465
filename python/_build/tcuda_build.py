"""PEP 517 backend: setuptools where it can build wheels, else a plain one.

pip's default build isolation installs `requires` from an index into a fresh
environment. This package requires nothing there, so `pip install ./python`
never needs a network:
  - when isolation hides the installed setuptools, the interpreter's
    site-packages are put back on the path;
  - setuptools builds the wheel when it can (setuptools >= 70.1, or the
    `wheel` package beside an older one);
  - otherwise this file writes the wheel itself: the tcuda package and the
    bundled libtcuda (found as setup.py finds it), nothing else.
"""
import base64
import hashlib
import importlib.util
import os
import re
import site
import sys
import sysconfig
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


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def _version():
    with open(os.path.join(HERE, "pyproject.toml")) as f:
        return re.search(r'^version\s*=\s*"([^"]+)"', f.read(), re.M).group(1)


def _find_library():
    spec = importlib.util.spec_from_file_location("tcuda_setup", os.path.join(HERE, "setup.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.find_library()


def _record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (arcname, digest, len(data))


def _plain_wheel(wheel_directory):
    version = _version()
    lib = _find_library()
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    tag = "py3-none-" + plat
    files = []
    pkg = os.path.join(HERE, "tcuda")
    for name in sorted(os.listdir(pkg)):
        if name.endswith(".py"):
            with open(os.path.join(pkg, name), "rb") as f:
                files.append(("tcuda/" + name, f.read()))
    if lib:
        sys.stderr.write("tcuda build: bundling %s\n" % os.path.realpath(lib))
        with open(os.path.realpath(lib), "rb") as f:
            files.append(("tcuda/libtcuda.so", f.read()))
    else:
        sys.stderr.write("tcuda build: WARNING: no libtcuda to bundle; at run time set "
                         "TCUDA_LIBRARY=/path/to/libtcuda.so\n")
    info = "tcuda-%s.dist-info" % version
    files.append((info + "/METADATA", ("Metadata-Version: 2.1\nName: tcuda\nVersion: %s\n"
                                       "Summary: torch.cuda's API on libtcuda\n" % version).encode()))
    files.append((info + "/WHEEL", ("Wheel-Version: 1.0\nGenerator: tcuda_build\nRoot-Is-Purelib: false\n"
                                    "Tag: %s\n" % tag).encode()))
    files.append((info + "/top_level.txt", b"tcuda\n"))
    record = [_record_line(a, d) for a, d in files] + [info + "/RECORD,,"]
    files.append((info + "/RECORD", ("\n".join(record) + "\n").encode()))
    wheel = "tcuda-%s-%s.whl" % (version, tag)
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel), "w", zipfile.ZIP_DEFLATED) as z:
        for arcname, data in files:
            z.writestr(arcname, data)
    return wheel


if _USE_SETUPTOOLS:
    build_wheel = _meta.build_wheel
    build_sdist = _meta.build_sdist
    prepare_metadata_for_build_wheel = _meta.prepare_metadata_for_build_wheel
    if hasattr(_meta, "build_editable"):
        build_editable = _meta.build_editable
        prepare_metadata_for_build_editable = _meta.prepare_metadata_for_build_editable
else:
    def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
        return _plain_wheel(wheel_directory)
