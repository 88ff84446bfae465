"""Bundles libtcuda into the wheel, so an installed package needs no
TCUDA_LIBRARY. Where it comes from, in order:
  1. TCUDA_LIBRARY (a path to libtcuda.so);
  2. the repository's build: ../build/src/libtcuda.so;
  3. a fresh CMake build of the repository (needs cmake and nvcc; only the
     library; TCUDA_NO_BUILD=1 skips it), in build/libtcuda-cmake here.
If none works the package installs without a copy and finds libtcuda at run
time (TCUDA_LIBRARY, then the system's library paths)."""
import os
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def _log(msg):
    sys.stderr.write("tcuda setup: %s\n" % msg)


def _cmake_build():
    if os.environ.get("TCUDA_NO_BUILD") == "1":
        return None
    if not os.path.exists(os.path.join(REPO, "CMakeLists.txt")):
        return None
    cmake = shutil.which("cmake")
    nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
    if not cmake or not nvcc:
        _log("no cmake or nvcc: cannot build libtcuda here")
        return None
    out = os.path.join(HERE, "build", "libtcuda-cmake")
    _log("building libtcuda with CMake in %s (a few minutes; TCUDA_NO_BUILD=1 skips)" % out)
    cfg = [cmake, "-S", REPO, "-B", out, "-DCMAKE_BUILD_TYPE=Release", "-DTCUDA_BUILD_TESTS=OFF",
           "-DTCUDA_BUILD_BENCH=OFF", "-DCMAKE_CUDA_COMPILER=" + nvcc]
    try:
        subprocess.check_call(cfg, stdout=sys.stderr)
        subprocess.check_call([cmake, "--build", out, "--target", "tcuda", "-j", "2"], stdout=sys.stderr)
    except (OSError, subprocess.CalledProcessError) as e:
        _log("CMake build failed (%s)" % e)
        return None
    path = os.path.join(out, "src", "libtcuda.so")
    return path if os.path.exists(path) else None


def find_library():
    env = os.environ.get("TCUDA_LIBRARY")
    if env:
        if not os.path.exists(env):
            raise SystemExit("tcuda setup: TCUDA_LIBRARY=%s does not exist" % env)
        return env
    built = os.path.join(REPO, "build", "src", "libtcuda.so")
    if os.path.exists(built):
        return built
    return _cmake_build()


def _extras():
    import importlib.util
    spec = importlib.util.spec_from_file_location("tcuda_extras", os.path.join(HERE, "_build", "tcuda_extras.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


HOOK_PTH = _extras().HOOK_PTH
header_files = _extras().header_files


class BuildPy(build_py):
    def run(self):
        super().run()
        with open(os.path.join(self.build_lib, HOOK_PTH[0]), "wb") as f:
            f.write(HOOK_PTH[1])
        for name, path in header_files():
            dest = os.path.join(self.build_lib, "tcuda", name)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            shutil.copyfile(path, dest)
        lib = find_library()
        dest = os.path.join(self.build_lib, "tcuda", "libtcuda.so")
        if lib:
            _log("bundling %s" % os.path.realpath(lib))
            shutil.copyfile(os.path.realpath(lib), dest)
        else:
            _log("WARNING: no libtcuda to bundle; at run time set TCUDA_LIBRARY=/path/to/libtcuda.so "
                 "or install libtcuda on the library path")


class BinaryDistribution(Distribution):
    """The wheel carries a native library: tag it for this platform."""

    def has_ext_modules(self):
        return True


if __name__ == "__main__":  # _build/tcuda_build.py imports find_library
    setup(cmdclass={"build_py": BuildPy}, distclass=BinaryDistribution)
