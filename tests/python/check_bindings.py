"""Checks python/tcuda/_lib.py against include/tcuda.h.

_lib.py writes every ctypes prototype by hand; a wrong one is not caught by
ctypes (an int where the C side takes size_t, a missing argument) and
corrupts memory or wraps values at run time. This parses the header and
checks, for each TCUDA_API function:
  - bound (in _lib._PROTOTYPES) or deliberately unbound (_lib._UNBOUND,
    with a reason), never both, and nothing else in either list;
  - a bound one has the header's argument count, and each argument and
    the result map C -> ctypes (rules at `compatible`);
  - every ctypes Structure a prototype uses (and those nested in it) has the
    C struct's fields: names, order and types;
  - the C constants that the package copies (_CONSTANTS) have their values.

    python3 tests/python/check_bindings.py [--header include/tcuda.h]

Run by tests/unit/python_bindings.sh; TCUDA_LIBRARY names the library to
load (importing tcuda._lib binds every prototype). Exit status 1 and one
line per problem on failure.
"""
import argparse
import ctypes
import importlib
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

# ctypes Structure (class name in tcuda._lib) -> the C typedef it mirrors.
STRUCTS = {
    "StreamT": "tcuda_stream_t",
    "DeviceGuardT": "tcuda_device_guard_t",
    "StreamGuardT": "tcuda_stream_guard_t",
    "DevicePropertiesT": "tcuda_device_properties_t",
    "StatT": "tcuda_stat_t",
    "DurationStatT": "tcuda_duration_stat_t",
    "HostMemoryStatsT": "tcuda_host_memory_stats_t",
    "GraphPoolT": "tcuda_graph_pool_t",
    "GraphScopeT": "tcuda_graph_capture_scope_t",
    "WhatifOptionsT": "tcuda_whatif_options_t",
}

# (module, attribute) of the package -> the C constant it copies.
_CONSTANTS = [
    ("tcuda._lib", "TCUDA_ERROR_OUT_OF_MEMORY", "TCUDA_ERROR_OUT_OF_MEMORY"),
    ("tcuda._lib", "TCUDA_ERROR_NOT_AVAILABLE", "TCUDA_ERROR_NOT_AVAILABLE"),
    ("tcuda.streams", "_TIMING", "TCUDA_EVENT_TIMING"),
    ("tcuda.streams", "_BLOCKING", "TCUDA_EVENT_BLOCKING"),
    ("tcuda.streams", "_INTERPROCESS", "TCUDA_EVENT_INTERPROCESS"),
    ("tcuda.comm", "_HOST", "TCUDA_COMM_HOST"),
    ("tcuda.comm", "BUFFER_SIZE", "TCUDA_COMM_BUFFER_SIZE_DEFAULT"),
    ("tcuda.random", "_STATE_SIZE", "TCUDA_RNG_STATE_SIZE"),
]

# C scalar spellings -> ctypes types (compared by their _type_ code, so
# aliases such as int64_t/ptrdiff_t/long on LP64 agree as the ABI does).
_SCALARS = {
    "int": ctypes.c_int, "signed int": ctypes.c_int, "unsigned": ctypes.c_uint, "unsigned int": ctypes.c_uint,
    "long": ctypes.c_long, "unsigned long": ctypes.c_ulong, "size_t": ctypes.c_size_t,
    "ptrdiff_t": ctypes.c_ssize_t, "int8_t": ctypes.c_int8, "uint8_t": ctypes.c_uint8,
    "int16_t": ctypes.c_int16, "uint16_t": ctypes.c_uint16, "int32_t": ctypes.c_int32,
    "uint32_t": ctypes.c_uint32, "int64_t": ctypes.c_int64, "uint64_t": ctypes.c_uint64,
    "float": ctypes.c_float, "double": ctypes.c_double, "char": ctypes.c_char,
    "signed char": ctypes.c_byte, "unsigned char": ctypes.c_ubyte,
}
_BYTE_CODES = {"c", "b", "B"}  # char, signed char, unsigned char: interchangeable for buffers


# ---------------------------------------------------------------- header

def _preprocess(text):
    """Comments out, line continuations joined, #if/#ifdef resolved with
    nothing predefined (no _WIN32, __cplusplus or DLPACK_DLPACK_H_), and
    integer #defines collected."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    text = text.replace("\\\n", " ")
    defined, consts, out, stack = set(), {}, [], []
    for line in text.split("\n"):
        s = line.strip()
        if not s.startswith("#"):
            if all(stack):
                out.append(line)
            continue
        d = s[1:].strip()
        word = d.split(None, 1)[0] if d else ""
        rest = d[len(word):].strip()
        if word in ("ifdef", "ifndef"):
            stack.append((rest in defined) == (word == "ifdef"))
        elif word == "if":
            m = re.fullmatch(r"defined\s*\(?\s*(\w+)\s*\)?", rest)
            stack.append(bool(m) and m.group(1) in defined)
        elif word == "else":
            stack[-1] = not stack[-1]
        elif word == "endif":
            stack.pop()
        elif word == "define" and all(stack):
            m = re.match(r"(\w+)(.*)", rest)
            name, val = m.group(1), m.group(2).strip()
            defined.add(name)
            # X-macro lists: X(NAME, value, ...)
            for k, v in re.findall(r"\bX\(\s*(\w+)\s*,\s*(-?\d+)", val):
                consts[k] = int(v)
            v = re.sub(r"\(\s*(?:size_t|int|unsigned|int64_t|uint64_t)\s*\)", "", val).replace("(", "")
            v = v.replace(")", "").strip()
            if re.fullmatch(r"-?(?:0x[0-9a-fA-F]+|\d+)", v):
                consts[name] = int(v, 0)
    return "\n".join(out), consts


def _split_top(s, sep):
    """Split at `sep` outside (), [] and {}."""
    parts, depth, cur = [], 0, []
    for ch in s:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


class Header:
    def __init__(self, path):
        with open(path) as f:
            text, self.consts = _preprocess(f.read())
        self.functions = {}   # name -> (ret type, [param types]); types from parse_decl
        self.structs = {}     # typedef name -> [(field, type)]
        self.opaque = set()   # typedef names and struct tags with no body here
        self.enums = {"tcuda_status"}
        self.fnptrs = set()
        self.tags = {}        # struct tag -> typedef name, for `struct tag`
        for decl in _split_top(text, ";"):
            self._declaration(" ".join(decl.split()))

    def _declaration(self, d):
        if not d:
            return
        if "TCUDA_API" in d:
            m = re.fullmatch(r"TCUDA_API\s+(.+?)\s*\b(\w+)\s*\((.*)\)", d)
            if not m:
                raise ValueError("cannot parse declaration: " + d)
            params = [p.strip() for p in _split_top(m.group(3), ",")]
            if params == ["void"]:
                params = []
            self.functions[m.group(2)] = (m.group(1), params)
            return
        m = re.fullmatch(r"typedef (struct|enum)\s*(\w*)\s*\{(.*)\}\s*(\w+)", d)
        if m:
            kind, tag, body, name = m.groups()
            if kind == "enum":
                self.enums.add(name)
                self._enumerators(body)
            else:
                self.structs[name] = self._fields(body)
                if tag:
                    self.tags[tag] = name
            return
        m = re.fullmatch(r"enum\s*(\w*)\s*\{(.*)\}", d)
        if m:
            self._enumerators(m.group(2))
            return
        m = re.fullmatch(r"typedef struct (\w+) (\w+)", d)
        if m:
            self.tags.setdefault(m.group(1), m.group(2))
            self.opaque.add(m.group(2))
            return
        m = re.fullmatch(r"struct (\w+)", d)
        if m:
            self.opaque.add(m.group(1))
            return
        m = re.fullmatch(r"typedef .*\(\s*\*\s*(\w+)\s*\)\s*\(.*\)", d)
        if m:
            self.fnptrs.add(m.group(1))
            return
        # typedef enum body-less forms or other declarations: nothing to record

    def _enumerators(self, body):
        value = -1
        for item in _split_top(body, ","):
            item = item.strip()
            if not item:
                continue
            name, _, expr = item.partition("=")
            expr = expr.strip()
            value = self._int(expr) if expr else value + 1
            self.consts[name.strip()] = value

    def _int(self, expr):
        expr = expr.strip()
        if expr in self.consts:
            return self.consts[expr]
        return int(expr, 0)

    def _fields(self, body):
        fields = []
        for decl in _split_top(body, ";"):
            decl = decl.strip()
            if not decl:
                continue
            first, *more = _split_top(decl, ",")
            m = re.fullmatch(r"(.*?)([\s*]*)(\w+)((?:\s*\[[^\]]*\])*)", first.strip())
            if not m or "(" in decl:
                fields.append((decl, ("?", decl)))   # e.g. a function pointer: never mirrored here
                continue
            base = m.group(1).strip()
            fields.append((m.group(3), self.parse_type(base + " " + m.group(2) + m.group(4), inline=True)))
            for other in more:
                o = re.fullmatch(r"([\s*]*)(\w+)((?:\s*\[[^\]]*\])*)", other.strip())
                fields.append((o.group(2), self.parse_type(base + " " + o.group(1) + o.group(3), inline=True)))
        return fields

    def parse_type(self, spelling, inline=False, named=False):
        """A C type (a parameter, result or field, with or without its name)
        as a tuple: ("s", ctypes code) scalar, ("void",), ("opaque", name),
        ("struct", typedef), ("fn",), ("p", pointee, pointee_const) pointer,
        ("a", element, n) array in a struct (`inline`), ("pa", element, n)
        a parameter's array (a pointer in C, whose length still counts)."""
        tokens = re.findall(r"\w+|\*|\[[^\]]*\]", spelling)
        arrays = [t[1:-1].strip() for t in tokens if t.startswith("[")]
        tokens = [t for t in tokens if not t.startswith("[")]
        base_words, stars, const_before_star = [], 0, False
        for t in tokens:
            if t == "*":
                stars += 1
            elif t == "const":
                if stars == 0:
                    const_before_star = True
            else:
                base_words.append((stars, t))
        names = [w for s, w in base_words]
        if named:  # a parameter: its last identifier is its name
            names = names[:-1]
        t = self._base(names)
        if t is None:
            raise ValueError("unknown C type %r" % spelling)
        for _ in range(stars):
            t = ("p", t, const_before_star)
            const_before_star = False
        for n in reversed(arrays):
            t = ("a" if inline else "pa", t, self._int(n))
        return t

    def _base(self, names):
        if names and names[0] in ("struct", "enum"):
            kind, rest = names[0], names[1:]
            if len(rest) != 1:
                return None
            tag = rest[0]
            if kind == "enum":
                return ("s", ctypes.c_int._type_)
            name = self.tags.get(tag, tag)
            if name in self.structs:
                return ("struct", name)
            return ("opaque", tag)
        spelled = " ".join(names)
        if spelled == "void":
            return ("void",)
        if spelled in _SCALARS:
            return ("s", _SCALARS[spelled]._type_)
        if len(names) != 1:
            return None
        n = names[0]
        if n in self.enums:
            return ("s", ctypes.c_int._type_)
        if n in self.structs:
            return ("struct", n)
        if n in self.opaque:
            return ("opaque", n)
        if n in self.fnptrs:
            return ("fn",)
        return None


def c_function_type(header, name):
    ret, params = header.functions[name]
    types = []
    for p in params:
        if re.search(r"\(\s*\*", p):
            types.append(("fn",))     # a function pointer parameter
        else:
            types.append(header.parse_type(p, named=True))
    return header.parse_type(ret), types


# ---------------------------------------------------------------- ctypes side

def py_type(t):
    if t is None:
        return ("void",)
    if t is ctypes.c_char_p:
        return ("p", ("s", "c"), None)
    if t is ctypes.c_void_p or (isinstance(t, type) and issubclass(t, ctypes.c_void_p)):
        return ("p", ("void",), None)
    if isinstance(t, type) and issubclass(t, ctypes._Pointer):
        return ("p", py_type(t._type_), None)
    if isinstance(t, type) and issubclass(t, ctypes.Array):
        return ("a", py_type(t._type_), t._length_)
    if isinstance(t, type) and issubclass(t, ctypes.Structure):
        return ("struct", STRUCTS.get(t.__name__, "?" + t.__name__))
    if isinstance(t, type) and issubclass(t, ctypes._CFuncPtr):
        return ("fn",)
    if isinstance(t, type) and isinstance(getattr(t, "_type_", None), str):
        return ("s", t._type_)
    return ("?", repr(t))


def _byte(t):
    return t[0] == "s" and t[1] in _BYTE_CODES


def compatible(c, py, inline=False):
    """Does the ctypes type `py` pass or receive the C type `c` correctly?
      - scalars: the same ctypes code (so the same size and signedness);
      - structs: the ctypes Structure that mirrors that typedef;
      - pointers: POINTER of a compatible pointee; c_void_p also for void*,
        opaque handles (T*, where T has no body in the header) and byte
        buffers; c_char_p for char*, and for const void* / const byte
        buffers (Python bytes are read-only);
      - a parameter's array T[n] is a T* (a ctypes array of exactly n, or
        what a T* takes); a struct field's array must be a ctypes array of n;
      - char, signed char and unsigned char agree as buffer elements.
    """
    if c == py:
        return True
    if c[0] == "s" and py[0] == "s":
        return c[1] == py[1]
    if c[0] in ("a", "pa") and py[0] == "a":
        return c[2] == py[2] and (compatible(c[1], py[1], True) or (_byte(c[1]) and _byte(py[1])))
    if c[0] == "pa":
        return compatible(("p", c[1], False), py)
    if c[0] == "p" and py[0] == "p":
        ci, pi = c[1], py[1]
        if pi == ("void",):
            return ci[0] in ("void", "opaque") or _byte(ci)
        if pi == ("s", "c") and (_byte(ci) or (ci == ("void",) and c[2])):
            return True
        if ci[0] == "opaque":
            return False
        if ci[0] == "p" and pi[0] == "p":
            return compatible(ci, pi)
        if _byte(ci) and _byte(pi):
            return True
        return ci == pi or (ci[0] == "s" and pi[0] == "s" and ci[1] == pi[1])
    if c == ("fn",):
        return py in (("fn",), ("p", ("void",), None))
    return False


def show(t):
    k = t[0]
    if k == "s":
        names = [n for n, v in _SCALARS.items() if v._type_ == t[1] and " " not in n and n != "long"]
        return "/".join(names) or t[1]
    if k in ("void", "fn"):
        return k
    if k in ("opaque", "struct"):
        return t[1]
    if k == "p":
        return show(t[1]) + "*"
    if k in ("a", "pa"):
        return "%s[%d]" % (show(t[1]), t[2])
    return t[1]


# ---------------------------------------------------------------- checks

def check(header, lib_module):
    errors = []
    protos, unbound = lib_module._PROTOTYPES, lib_module._UNBOUND
    exported = set(header.functions)
    for name in sorted(set(protos) & set(unbound)):
        errors.append("%s: both bound and listed in _UNBOUND" % name)
    for name in sorted(set(protos) - exported):
        errors.append("%s: bound in _lib.py but not declared TCUDA_API in tcuda.h" % name)
    for name in sorted(set(unbound) - exported):
        errors.append("%s: listed in _UNBOUND but not declared TCUDA_API in tcuda.h" % name)
    for name, why in sorted(unbound.items()):
        if not isinstance(why, str) or len(why.strip()) < 10:
            errors.append("%s: _UNBOUND needs a reason, got %r" % (name, why))
    for name in sorted(exported - set(protos) - set(unbound)):
        errors.append("%s: exported by tcuda.h but neither bound in _lib.py nor listed in _UNBOUND" % name)

    structs_used = set()
    for name in sorted(set(protos) & exported):
        res, args = protos[name]
        cres, cargs = c_function_type(header, name)
        if len(args) != len(cargs):
            errors.append("%s: %d arguments bound, tcuda.h declares %d" % (name, len(args), len(cargs)))
        else:
            for i, (pa, ca) in enumerate(zip(args, cargs)):
                p = py_type(pa)
                if not compatible(ca, p):
                    errors.append("%s: argument %d is %s in tcuda.h, bound as %s" % (name, i + 1, show(ca), show(p)))
                structs_used |= _structs_in(pa)
        p = py_type(res)
        if not compatible(cres, p):
            errors.append("%s: returns %s in tcuda.h, bound as %s" % (name, show(cres), show(p)))
        structs_used |= _structs_in(res)

    seen = set()
    todo = sorted(structs_used, key=lambda c: c.__name__)
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen.add(cls)
        cname = STRUCTS.get(cls.__name__)
        if cname is None:
            errors.append("ctypes Structure %s: not in check_bindings.STRUCTS (which C struct does it mirror?)"
                          % cls.__name__)
            continue
        if cname not in header.structs:
            errors.append("%s mirrors %s, which tcuda.h does not define" % (cls.__name__, cname))
            continue
        cfields = header.structs[cname]
        pfields = cls._fields_
        if [f[0] for f in pfields] != [f[0] for f in cfields]:
            errors.append("%s fields %s differ from %s's %s" % (cls.__name__, [f[0] for f in pfields], cname,
                                                                 [f[0] for f in cfields]))
            continue
        for (fname, ftype), (_, ctype_) in zip(pfields, cfields):
            p = py_type(ftype)
            if not compatible(ctype_, p, inline=True):
                errors.append("%s.%s is %s in tcuda.h, %s in _lib.py" % (cname, fname, show(ctype_), show(p)))
            todo.extend(_structs_in(ftype) - seen)
        if ctypes.sizeof(cls) == 0:
            errors.append("%s: empty Structure" % cls.__name__)

    for module, attr, cname in _CONSTANTS:
        mod = importlib.import_module(module)
        want = header.consts.get(cname)
        got = getattr(mod, attr, None)
        if want is None:
            errors.append("%s: no such constant in tcuda.h (copied as %s.%s)" % (cname, module, attr))
        elif got != want:
            errors.append("%s.%s is %r, tcuda.h's %s is %r" % (module, attr, got, cname, want))
    return errors


def _structs_in(t):
    out = set()
    while t is not None:
        if isinstance(t, type) and issubclass(t, ctypes.Structure):
            out.add(t)
            return out
        t = getattr(t, "_type_", None) if isinstance(t, type) and issubclass(t, (ctypes._Pointer, ctypes.Array)) \
            else None
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--header", default=os.path.join(REPO, "include", "tcuda.h"))
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(REPO, "python"))
    lib_module = importlib.import_module("tcuda._lib")
    header = Header(args.header)
    errors = check(header, lib_module)
    nb, nu = len(lib_module._PROTOTYPES), len(lib_module._UNBOUND)
    if errors:
        for e in errors:
            print("FAIL:", e)
        print("%d problem(s); tcuda.h exports %d functions, _lib.py binds %d and lists %d as unbound"
              % (len(errors), len(header.functions), nb, nu))
        return 1
    print("ok: tcuda.h exports %d functions: %d bound with matching prototypes, %d deliberately unbound"
          % (len(header.functions), nb, nu))
    return 0


if __name__ == "__main__":
    sys.exit(main())
