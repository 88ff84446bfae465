#!/usr/bin/env bash
# scripts/torch-memory-tests runs one at a time the tests that must not share
# the GPU or a build folder: serialTest()'s, and those building a torch
# extension (load_inline, directly or through a helper of their class), whose
# one-folder-per-name cache raced between workers; and each phase's time
# leaves the later phases a reserve, not a share. A hand-made test file and
# hand-computed budgets are the oracle.
set -u
script="${TCUDA_SOURCE_DIR:?}/scripts/torch-memory-tests"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/test_x.py" <<'PY'
class TestA:
    def helper(self):
        from torch.utils.cpp_extension import load_inline
        return load_inline(name="x", cpp_sources="")

    def other_helper(self):
        return 1

    def test_uses_helper(self):
        self.helper()

    def test_builds_itself(self):
        from torch.utils.cpp_extension import load_inline
        load_inline(name="y", cpp_sources="")

    @serialTest()
    def test_marked(self):
        pass

    def test_plain(self):
        self.other_helper()


class TestB:
    def test_same_name_elsewhere(self):
        self.helper()  # TestB has no such builder
PY
python3 - "$script" "$tmp/test_x.py" <<'PY' || exit 1
import sys
from importlib.machinery import SourceFileLoader
from importlib.util import module_from_spec, spec_from_loader
loader = SourceFileLoader("tmt", sys.argv[1])
m = module_from_spec(spec_from_loader("tmt", loader))
loader.exec_module(m)
got = m.serial_tests(sys.argv[2])
want = {"TestA": ({"test_uses_helper", "test_builds_itself", "test_marked", "test_plain"},
                  {"test_uses_helper", "test_builds_itself", "test_marked"}),
        "TestB": ({"test_same_name_elsewhere"}, set())}
if got != want:
    print("FAIL: serial_tests gave %r, want %r" % (got, want))
    sys.exit(1)
ids = ["f.py::TestA::test_uses_helper_cuda", "f.py::TestA::test_plain", "f.py::TestB::test_same_name_elsewhere"]
flags = [m.is_serial(i, got) for i in ids]
if flags != [True, False, False]:
    print("FAIL: is_serial gave %r" % flags)
    sys.exit(1)
# phase budgets: all that is left but the later phases' reserve
# (15 s a session, 3 s a test), the parallel phase at least 60%
sizes = [61, 13, 0, 5, 9, 12]
checks = [(m.phase_budget(190, 1, sizes), 190 - (15 + 15) - (15 + 27) - (15 + 36)),
          (m.phase_budget(240, 0, sizes), 144),
          (m.phase_budget(500, 0, sizes), 500 - (15 + 39) - (15 + 15) - (15 + 27) - (15 + 36)),
          (m.phase_budget(83, 5, sizes), 83),
          (m.phase_budget(60, 3, sizes), 20)]
if [g for g, w in checks] != [w for g, w in checks]:
    print("FAIL: phase_budget gave %r, want %r" % ([g for g, w in checks], [w for g, w in checks]))
    sys.exit(1)
print("ok")
PY
