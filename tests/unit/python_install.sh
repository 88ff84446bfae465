#!/usr/bin/env bash
# Installing the Python package offline (python/_build/tcuda_build.py):
#  1. pip install -e, with pip's build isolation and without: the package
#     imports from the source tree, and nothing else from python/ does;
#  2. the sdist holds what a wheel build needs (PKG-INFO, pyproject.toml,
#     setup.py, _build/, every module, tcuda.h);
#  3. a wheel built from that sdist bundles the library and tcuda.h (for
#     tcuda.torch's glue) and works alone.
# Nothing is downloaded (PIP_NO_INDEX). SKIPPED (77) without a python3
# whose pip has --python (22.3+) or that can make a venv with pip.
set -u
src="${TCUDA_SOURCE_DIR:?}"
bin="${TCUDA_BINARY_DIR:?}"
lib="$bin/src/libtcuda.so"
[ -f "$lib" ] || { echo "FAIL: $lib not built"; exit 1; }
case "$(ldd "$lib" 2> /dev/null)" in *libasan*|*libubsan*) echo "SKIPPED: a sanitizer build"; exit 77;; esac
py=""
for c in ${PYTHON:-} python3 /usr/bin/python3; do
  command -v "$c" > /dev/null 2>&1 || continue
  if "$c" -c 'import sys, pip; sys.exit(tuple(map(int, pip.__version__.split(".")[:2])) < (22, 3))' 2> /dev/null; then
    py="$c"; break
  fi
done
[ -n "$py" ] || { echo "SKIPPED: no python3 with pip 22.3+"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PIP_NO_INPUT=1
export TCUDA_NO_BUILD=1 PYTHONDONTWRITEBYTECODE=1
unset PYTHONPATH
"$py" -m venv --without-pip "$tmp/venv" || { echo "SKIPPED: $py cannot make a venv"; exit 77; }
vpy="$tmp/venv/bin/python"
pip() { "$py" -m pip --python "$vpy" "$@"; }
fail=0

check_editable() {  # $1: how it was installed
  (cd "$tmp" && TCUDA_LIBRARY="$lib" "$vpy" - "$src" "$lib" "$1" <<'PY') || fail=1
import importlib.util, os, sys
src, lib, how = sys.argv[1:]
import tcuda
want = os.path.realpath(os.path.join(src, "python", "tcuda", "__init__.py"))
assert os.path.realpath(tcuda.__file__) == want, (how, tcuda.__file__, want)
assert os.path.realpath(tcuda.library_path()) == os.path.realpath(lib), tcuda.library_path()
for other in ("setup", "_build", "tcuda_build"):   # only the package comes from python/
    assert importlib.util.find_spec(other) is None, (how, other)
print("ok: editable install (%s) imports %s" % (how, tcuda.__file__))
PY
}

echo "== pip install -e (build isolation, offline)"
pip install -q -e "$src/python" && check_editable "isolated" || fail=1
pip uninstall -q -y tcuda || fail=1
echo "== pip install --no-build-isolation -e"
pip install -q --no-build-isolation -e "$src/python" && check_editable "no isolation" || fail=1
pip uninstall -q -y tcuda || fail=1
[ ! -e "$src/python/tcuda.egg-info" ] || { echo "FAIL: the editable install wrote python/tcuda.egg-info"; fail=1; }

echo "== sdist"
mkdir -p "$tmp/dist" "$tmp/unpacked" "$tmp/wheels"
sdist=$("$py" -c 'import sys; sys.path.insert(0, sys.argv[1]); import tcuda_build
print(tcuda_build.build_sdist(sys.argv[2]))' "$src/python/_build" "$tmp/dist" | tail -1) || fail=1
"$py" - "$tmp/dist/$sdist" "$src/python" <<'PY' || fail=1
import os, sys, tarfile
path, pkg = sys.argv[1:]
names = set(tarfile.open(path).getnames())
base = os.path.basename(path)[:-len(".tar.gz")]
want = {base + "/" + n for n in ("PKG-INFO", "pyproject.toml", "setup.py", "README.md", "_build/tcuda_build.py",
                                 "include/tcuda.h")}  # tcuda.h: for the glue tcuda.torch builds
want |= {base + "/tcuda/" + n for n in os.listdir(os.path.join(pkg, "tcuda")) if n.endswith(".py")}
assert not want - names, "missing from the sdist: %s" % sorted(want - names)
assert not any(n.endswith(".so") for n in names), "the sdist carries a library"
print("ok: %s has the %d files a build needs" % (base, len(want)))
PY
tar -xzf "$tmp/dist/$sdist" -C "$tmp/unpacked" || fail=1

echo "== wheel from the sdist (build isolation, offline), installed alone"
TCUDA_LIBRARY="$lib" "$py" -m pip wheel -q --no-deps -w "$tmp/wheels" "$tmp/unpacked/${sdist%.tar.gz}" || fail=1
pip install -q "$tmp/wheels"/tcuda-*.whl || fail=1
(cd "$tmp" && env -u TCUDA_LIBRARY "$vpy" - <<'PY') || fail=1
import os, tcuda
here = os.path.dirname(tcuda.__file__)
assert "site-packages" in here, here
assert os.path.dirname(tcuda.library_path()) == here, (tcuda.library_path(), here)  # the bundled copy
import tcuda.torch
inc, _ = tcuda.torch._headers()  # what the glue compiles against, found in the installed package
assert inc == os.path.join(here, "include") and os.path.isfile(os.path.join(inc, "tcuda.h")), inc
print("ok: the wheel from the sdist imports from %s with its own library and tcuda.h" % here)
PY
[ "$fail" = 0 ] && echo "PASS" || echo "FAIL"
exit "$fail"
