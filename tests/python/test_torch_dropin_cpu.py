"""tcuda.torch (tcuda under torch) without a GPU: the refusals, the cache
directory, the TCUDA_TORCH_ALLOCATOR hook and, where torch and a CUDA
toolkit are installed, the glue compiling against torch's headers.

Refusals are checked against a stand-in `torch` package (written per test)
so they run without torch; the real-torch tests are skipped without it.
tests/unit/python_torch_dropin.sh runs this file.
"""
import importlib
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PKG = os.path.join(REPO, "python")


def fake_torch(tmp_path, version="2.11.0+cu130", cuda="13.0", available=False):
    """A stand-in torch package: records that it ran, and fails any build."""
    d = tmp_path / "faketorch"
    (d / "torch" / "utils").mkdir(parents=True, exist_ok=True)
    (d / "torch" / "__init__.py").write_text(textwrap.dedent("""
        import os
        __version__ = %r
        class version:
            cuda = %r
        class cuda:
            @staticmethod
            def is_available():
                return %r
        os.environ["FAKE_TORCH_RAN"] = "1"
    """ % (version, cuda, available)))
    (d / "torch" / "utils" / "__init__.py").write_text("")
    (d / "torch" / "utils" / "cpp_extension.py").write_text(
        "def load(*a, **k):\n    raise AssertionError('the glue must not be built here')\n")
    return str(d)


def run_py(code, paths, env_extra=None):
    env = dict(os.environ)
    env.pop("TCUDA_TORCH_ALLOCATOR", None)
    env["PYTHONPATH"] = os.pathsep.join(paths + [PKG])
    for k, v in (env_extra or {}).items():  # None removes the variable
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True,
                          timeout=600)


def test_import_does_not_import_torch(tmp_path):
    r = run_py("""
        import sys, tcuda, tcuda.torch, tcuda.torch_hook
        assert 'torch' not in sys.modules, 'torch was imported'
        assert tcuda.torch is sys.modules['tcuda.torch']
        print('ok')
    """, [fake_torch(tmp_path)])
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr


@pytest.mark.parametrize("version", ["2.10.0", "2.12.0a0+git", "1.13.1"])
def test_unsupported_version_refused_before_building(tmp_path, version):
    cache = tmp_path / "cache"
    r = run_py("""
        import tcuda.torch as tt
        for fn in (tt.install, tt.build):
            try:
                fn()
                raise SystemExit('no error from %s' % fn.__name__)
            except tt.InstallError as e:
                assert 'is not supported (supported: 2.11)' in str(e), str(e)
                assert isinstance(e, RuntimeError)
        print('ok')
    """, [fake_torch(tmp_path, version=version, available=True)], {"TCUDA_TORCH_CACHE": str(cache)})
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr
    assert not cache.exists()  # nothing was built or cached


def test_no_torch(tmp_path):
    r = run_py("""
        import sys
        sys.modules['torch'] = None  # import torch fails
        import tcuda.torch as tt
        try:
            tt.install()
        except tt.InstallError as e:
            assert 'torch is not installed' in str(e), str(e)
            print('ok')
    """, [])
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr


def test_no_cuda_refused(tmp_path):
    r = run_py("""
        import tcuda.torch as tt
        try:
            tt.install()
        except tt.InstallError as e:
            assert 'CUDA is not available' in str(e), str(e)
            assert not tt.is_installed()
            print('ok')
    """, [fake_torch(tmp_path, available=False)])
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("var", ["PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF", "TCUDA_ALLOC_CONF"])
def test_config_tcuda_cannot_run_refused(tmp_path, var):
    env = {v: None for v in ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF", "TCUDA_ALLOC_CONF")}
    env[var] = "max_split_size_mb:20,backend:cudaMallocAsync"
    r = run_py("""
        import tcuda.torch as tt
        try:
            tt.install()
        except tt.InstallError as e:
            assert 'configuration is not one tcuda can run' in str(e) and 'cudaMallocAsync' in str(e), str(e)
            print('ok')
    """, [fake_torch(tmp_path, available=True)], env)
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr


def test_cpu_only_torch_refused(tmp_path):
    r = run_py("""
        import tcuda.torch as tt
        for fn in (tt.install, tt.build):
            try:
                fn()
                raise SystemExit('no error from %s' % fn.__name__)
            except tt.InstallError as e:
                assert 'CUDA' in str(e), str(e)
        print('ok')
    """, [fake_torch(tmp_path, version="2.11.0+cpu", cuda=None)])
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr


def test_cache_dir_choice(tmp_path, monkeypatch):
    sys.path.insert(0, PKG)
    try:
        tt = importlib.import_module("tcuda.torch")
    finally:
        sys.path.remove(PKG)
    monkeypatch.delenv("TCUDA_TORCH_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert tt.cache_dir() == str(tmp_path / "xdg" / "tcuda" / "torch-glue")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert tt.cache_dir() == str(tmp_path / "home" / ".cache" / "tcuda" / "torch-glue")
    monkeypatch.setenv("TCUDA_TORCH_CACHE", "relative/dir")
    assert tt.cache_dir() == os.path.abspath("relative/dir")


def test_cache_key_follows_torch_and_glue(tmp_path):
    sys.path.insert(0, PKG)
    try:
        tt = importlib.import_module("tcuda.torch")
    finally:
        sys.path.remove(PKG)

    class T:
        __version__ = "2.11.0+cu130"

        class version:
            cuda = "13.0"

    inc, _ = tt._headers()
    k1 = tt._key(T, inc)
    assert k1.startswith("torch2.11.0-py%d%d-" % sys.version_info[:2])
    assert tt._key(T, inc) == k1
    T.__version__ = "2.11.1+cu130"
    assert tt._key(T, inc) != k1
    T.__version__ = "2.11.0+cu130"
    # another glue source: another key
    src = tmp_path / "glue.cpp"
    shutil.copyfile(tt.GLUE_SOURCE, src)
    with open(src, "a") as f:
        f.write("\n// changed\n")
    old = tt.GLUE_SOURCE
    tt.GLUE_SOURCE = str(src)
    try:
        assert tt._key(T, inc) != k1
    finally:
        tt.GLUE_SOURCE = old


def test_unwritable_cache_refused(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    r = run_py("""
        import tcuda.torch as tt
        try:
            tt.build()
        except tt.InstallError as e:
            assert 'TCUDA_TORCH_CACHE' in str(e) and 'cannot create' in str(e), str(e)
            print('ok')
    """, [fake_torch(tmp_path, available=True)], {"TCUDA_TORCH_CACHE": str(blocker / "sub")})
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr


def test_settings_for_tcuda_drop_pinned_keys():
    sys.path.insert(0, PKG)
    try:
        tt = importlib.import_module("tcuda.torch")
    finally:
        sys.path.remove(PKG)
    f = tt._device_keys
    assert f("") == ""
    assert f("pinned_reserve_segment_size_mb:100") == ""
    assert f("max_split_size_mb:40,pinned_use_cuda_host_register:True,expandable_segments:True") == \
        "max_split_size_mb:40,expandable_segments:True"
    assert f("roundup_power2_divisions:[256:1,512:2,>:8],pinned_num_register_threads:8") == \
        "roundup_power2_divisions:[256:1,512:2,>:8]"


# ---- the TCUDA_TORCH_ALLOCATOR hook ----

HOOK = """
    import os, sys
    import tcuda.torch_hook
    armed = any(type(f).__name__ == '_TorchFinder' for f in sys.meta_path)
    try:
        import torch
        print('imported', armed, os.environ.get('FAKE_TORCH_RAN'))
    except Exception as e:
        print('raised', armed, os.environ.get('FAKE_TORCH_RAN'), type(e).__name__, e)
"""


def test_hook_installs_after_torch_import(tmp_path):
    r = run_py(HOOK, [fake_torch(tmp_path)], {"TCUDA_TORCH_ALLOCATOR": "1"})
    # torch's module ran first, then install() refused (no CUDA here), loudly
    assert "raised True 1 InstallError" in r.stdout and "CUDA is not available" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("value", ["", "0"])
def test_hook_off(tmp_path, value):
    r = run_py(HOOK, [fake_torch(tmp_path)], {"TCUDA_TORCH_ALLOCATOR": value})
    assert "imported False 1" in r.stdout, r.stdout + r.stderr


def test_hook_bad_value(tmp_path):
    r = run_py(HOOK, [fake_torch(tmp_path)], {"TCUDA_TORCH_ALLOCATOR": "yes"})
    assert "raised True 1 InstallError" in r.stdout and "TCUDA_TORCH_ALLOCATOR='yes'" in r.stdout, r.stdout


def test_hook_without_torch_import(tmp_path):
    r = run_py("""
        import sys, tcuda.torch_hook
        print('torch' in sys.modules)
    """, [fake_torch(tmp_path)], {"TCUDA_TORCH_ALLOCATOR": "1"})
    assert r.stdout.strip() == "False", r.stdout + r.stderr


def test_pth_line(tmp_path):
    """The .pth line the wheel installs: imports the hook only when the variable is on."""
    sys.path.insert(0, PKG)
    try:
        spec = importlib.util.spec_from_file_location("tcuda_extras_t", os.path.join(PKG, "_build", "tcuda_extras.py"))
        setup = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(setup)
    finally:
        sys.path.remove(PKG)
    name, line = setup.HOOK_PTH
    assert name.endswith(".pth") and line.startswith(b"import ")
    code = "import sys\nexec(%r)\nprint('tcuda.torch_hook' in sys.modules)" % line.decode()
    off = run_py(code, [fake_torch(tmp_path)], {"TCUDA_TORCH_ALLOCATOR": "0"})
    on = run_py(code, [fake_torch(tmp_path)], {"TCUDA_TORCH_ALLOCATOR": "1"})
    assert off.stdout.strip() == "False" and on.stdout.strip() == "True", off.stdout + on.stdout + on.stderr


# ---- with the real torch ----

def real_torch_ok():
    try:
        import torch  # noqa: F401
    except ImportError:
        return "torch is not installed"
    if torch.version.cuda is None:
        return "torch has no CUDA"
    from torch.utils import cpp_extension
    if not cpp_extension.CUDA_HOME or not os.path.isfile(os.path.join(cpp_extension.CUDA_HOME, "include",
                                                                      "cuda_runtime_api.h")):
        return "no CUDA toolkit headers (CUDA_HOME)"
    ver = ".".join(torch.__version__.split("+")[0].split(".")[:2])
    if ver != "2.11":
        return "torch %s is not a supported version" % torch.__version__
    return None


@pytest.mark.skipif(real_torch_ok() is not None, reason=str(real_torch_ok()))
def test_glue_compiles_against_torch(tmp_path):
    cache = os.environ.get("TCUDA_TORCH_TEST_CACHE") or str(tmp_path / "cache")
    r = run_py("""
        import torch, tcuda, tcuda.torch as tt
        m = tt.build()
        assert m.current_allocator_name() == 'native' and not m.installed() and not tt.is_installed()
        if not torch.cuda.is_available():
            try:
                tt.install()
                raise SystemExit('installed without CUDA')
            except tt.InstallError as e:
                assert 'CUDA is not available' in str(e), str(e)
            # the swap itself needs no GPU: torch then reports tcuda's allocator
            m.install()
            assert m.installed() and torch.cuda.get_allocator_backend() == 'tcuda'
            # torch's own snapshot code runs on tcuda's (empty) state and pickles
            import pickle
            snap = torch.cuda.memory._snapshot()
            assert snap['segments'] == [] and 'allocator_settings' in snap, snap
            assert snap['allocator_settings']['PYTORCH_CUDA_ALLOC_CONF'].startswith('backend:native')
            pickle.loads(pickle.dumps(snap))
            # tcuda's errors reach Python as torch's RuntimeError
            try:
                torch._C._cuda_cudaCachingAllocator_raw_delete(12345)
                raise SystemExit('no error for a foreign pointer')
            except RuntimeError as e:
                assert str(e).startswith('tcuda: tcuda_free: pointer 0x3039'), str(e)
        print('ok', m.__file__)
    """, [], {"TCUDA_TORCH_CACHE": cache})
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]
    assert r.stdout.split()[-1].startswith(cache)
