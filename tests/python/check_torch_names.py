"""Every public torch.cuda name is in tcuda, or listed with a reason in
docs/python.md's table "torch.cuda names tcuda does not provide".

The names are torch's own, recorded from the torch release tcuda follows:
  tests/data/torch/torch_cuda_names.txt          torch.cuda.__all__
  tests/data/torch/torch_cuda_memory_names.txt   torch.cuda.memory.__all__
one name per line ('#' starts a comment). A torch.cuda name must be an
attribute of `tcuda`, a torch.cuda.memory one of `tcuda.memory`, unless
the table lists it; a name both present and listed is an error too (the
table would be stale).

    python3 tests/python/check_torch_names.py [--names-dir DIR] [--doc FILE]

Exit 0 when every name is accounted for, 1 otherwise, 77 (SKIPPED) when
the name files are missing.
"""
import argparse
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
TABLE_TITLE = "torch.cuda names tcuda does not provide"
SKIP = 77


def read_names(path):
    with open(path) as f:
        return [ln.split("#", 1)[0].strip() for ln in f if ln.split("#", 1)[0].strip()]


def documented(doc_path):
    """{name: reason} from the table under the heading TABLE_TITLE: the
    first column holds one or more `names`, the second the reason."""
    with open(doc_path) as f:
        text = f.read()
    m = re.search(r"^#+\s*" + re.escape(TABLE_TITLE) + r"\s*$", text, re.M)
    if not m:
        raise SystemExit("FAIL: %s has no heading %r" % (doc_path, TABLE_TITLE))
    out = {}
    for line in text[m.end():].split("\n"):
        if line.startswith("#"):
            break
        if not line.startswith("|") or set(line) <= set("|-: "):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or cells[0].lower() == "name":
            continue
        for name in re.findall(r"`([^`]+)`", cells[0]):
            out[name.split("(")[0].strip()] = cells[1]
    return out


def check(names, namespace, label, listed):
    problems = []
    for name in names:
        present = hasattr(namespace, name)
        why = listed.get(name)
        if present and why is not None:
            problems.append("%s.%s exists in tcuda but docs/python.md lists it as not provided" % (label, name))
        elif not present and why is None:
            problems.append("%s.%s is neither in tcuda nor listed (with a reason) in docs/python.md's table %r"
                            % (label, name, TABLE_TITLE))
        elif not present and len(why) < 10:
            problems.append("%s.%s: the reason in docs/python.md is too short: %r" % (label, name, why))
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--names-dir", default=os.path.join(REPO, "tests", "data", "torch"))
    ap.add_argument("--doc", default=os.path.join(REPO, "docs", "python.md"))
    args = ap.parse_args()
    files = {"torch.cuda": os.path.join(args.names_dir, "torch_cuda_names.txt"),
             "torch.cuda.memory": os.path.join(args.names_dir, "torch_cuda_memory_names.txt")}
    missing = [p for p in files.values() if not os.path.exists(p)]
    if missing:
        print("SKIPPED: torch's name lists are not recorded yet (%s)" % ", ".join(missing))
        return SKIP
    sys.path.insert(0, os.path.join(REPO, "python"))
    import tcuda
    listed = documented(args.doc)
    problems, total = [], 0
    for label, path in files.items():
        names = read_names(path)
        total += len(names)
        problems += check(names, tcuda if label == "torch.cuda" else tcuda.memory, label, listed)
    for p in problems:
        print("FAIL:", p)
    if problems:
        return 1
    print("ok: %d torch.cuda / torch.cuda.memory names: each in tcuda or listed with a reason" % total)
    return 0


if __name__ == "__main__":
    sys.exit(main())
