"""tcuda.whatif on torch's recorded snapshots (tests/data/whatif): a path and
the dict form give the same document, argument checks name the argument,
the library's errors come back as TcudaError with its message, and the
package never unpickles anything itself. Run by tests/unit/python_pkg.sh.

The tests load the committed snapshots with Python's pickle module to build
the dict form: they are this repository's own trusted files."""
import copy
import gzip
import json
import os
import pathlib
import pickle
import subprocess
import sys

import pytest

import tcuda

DATA = os.path.join(os.environ.get("TCUDA_TEST_DATA") or
                    os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data"), "whatif")
SMALL = os.path.join(DATA, "side_stream.pickle")
CONFIGS = ["expandable_segments:True", "max_split_size_mb:128"]


def _load(name):
    with open(os.path.join(DATA, name), "rb") as f:
        return pickle.load(f)  # the repository's own test data


@pytest.fixture
def small_dict():
    return _load("side_stream.pickle")


@pytest.fixture
def no_unpickling(monkeypatch):
    """Any pickle.load/loads/Unpickler use during the test fails it."""
    def refuse(*a, **k):
        raise AssertionError("tcuda.whatif unpickled something")
    for name in ("load", "loads", "Unpickler"):
        monkeypatch.setattr(pickle, name, refuse)


def test_path_and_dict_give_the_same_document(small_dict, no_unpickling):
    snap = small_dict  # loaded before no_unpickling took pickle away
    by_path = tcuda.whatif(SMALL, configs=CONFIGS)
    by_pathlike = tcuda.whatif(pathlib.Path(SMALL), configs=CONFIGS)
    by_dict = tcuda.whatif(snap, configs=CONFIGS)
    assert by_path == by_pathlike == by_dict
    assert [r["config"] for r in by_path["configs"]][1:] == CONFIGS
    assert by_path["configs"][0]["source"] == "recorded"
    assert set(by_path) == {"snapshot", "configs", "recommended", "recommended_reserved", "recommendation_withheld",
            "explain", "notes"}


def test_default_sweep_and_recorded_row():
    doc = tcuda.whatif(os.path.join(DATA, "tf_default.pickle"))
    rows = doc["configs"]
    assert rows[0]["source"] == "recorded" and len(rows) > 5
    assert all(r["source"] == "sweep" for r in rows[1:])
    for r in rows:
        assert r["peak_reserved"] >= r["peak_allocated"] > 0
        assert "series" not in r
    rec = doc["recommended"]
    assert rec is None or any(r["config"] == rec["config"] for r in rows)


def test_compare_matches_torchs_peaks_and_names_the_argument(tmp_path):
    b, a = os.path.join(DATA, "tf_default.pickle"), os.path.join(DATA, "tf_expandable.pickle")
    doc = tcuda.whatif_compare(b, pathlib.Path(a))
    for side, name in (("before", "tf_default"), ("after", "tf_expandable")):
        with open(os.path.join(DATA, name + ".stats.json")) as f:
            end = json.load(f)["end"]  # torch's memory_stats() at the end of the run
        assert doc[side]["peak_reserved"] == end["reserved_bytes.all.peak"]
        assert doc[side]["peak_allocated"] == end["allocated_bytes.all.peak"]
    assert doc["change"]["peak_reserved"] == doc["after"]["peak_reserved"] - doc["before"]["peak_reserved"]
    assert doc["before_explain"]["stacks_recorded"] is False
    with pytest.raises(tcuda.TcudaError, match="after: .*nowhere.pickle"):
        tcuda.whatif_compare(b, str(tmp_path / "nowhere.pickle"))
    with pytest.raises(TypeError, match="before must be a path"):
        tcuda.whatif_compare({}, a)
    with pytest.raises(ValueError, match="fraction"):
        tcuda.whatif_compare(b, a, fraction=2)


def test_json_file_gives_the_pickles_document():
    a = tcuda.whatif(os.path.join(DATA, "tf_default.pickle"), configs=CONFIGS)
    b = tcuda.whatif(os.path.join(DATA, "tf_default.json"), configs=CONFIGS)
    assert a == b


def test_dict_with_a_tuple_segment_pool_id():
    snap = _load("side_stream.pickle")
    segs = snap["segments"]
    assert segs, "the snapshot has segments"
    for g in segs:
        g["segment_pool_id"] = tuple(g.get("segment_pool_id", (0, 0)))
    listed = copy.deepcopy(snap)
    for g in listed["segments"]:
        g["segment_pool_id"] = list(g["segment_pool_id"])
    assert tcuda.whatif(snap, configs=CONFIGS) == tcuda.whatif(listed, configs=CONFIGS)


def test_limit_series_and_first_oom():
    snap = os.path.join(DATA, "tf_limit.pickle")
    doc = tcuda.whatif(snap, configs=CONFIGS, fraction=0.002291207795694817, series_points=50, threads=2)
    s = doc["snapshot"]
    assert s["limit"] == int(0.002291207795694817 * s["capacity"])
    r0 = doc["configs"][0]
    assert r0["ooms"] > 0 and r0["first_oom"]["size"] > 0
    for r in doc["configs"]:
        ser = r["series"]
        assert 0 < len(ser["t_ms"]) <= 50 and len(ser["t_ms"]) == len(ser["reserved"]) == len(ser["allocated"])
        assert len(ser["reserved_min"]) == len(ser["allocated_min"]) == len(ser["t_ms"])
        assert all(lo <= hi for lo, hi in zip(ser["reserved_min"], ser["reserved"]))
        assert all(lo <= hi for lo, hi in zip(ser["allocated_min"], ser["allocated"]))
        assert max(ser["reserved"]) == r["peak_reserved"] and max(ser["allocated"]) == r["peak_allocated"]
    small = tcuda.whatif(snap, configs=CONFIGS, capacity=1 << 30)
    assert small["snapshot"]["capacity"] == 1 << 30


def test_values_json_cannot_carry_name_their_key():
    # torch's snapshots hold no bytes; a dict that does is refused, not guessed at
    snap = _load("side_stream.pickle")
    snap["device_traces"][0][3]["frames"] = [{"name": b"raw", "filename": "x.py", "line": 1}]
    with pytest.raises(TypeError) as ei:
        tcuda.whatif(snap)
    assert "snapshot['device_traces'][0][3]['frames'][0]['name']" in str(ei.value)
    assert "bytes" in str(ei.value)
    snap = _load("side_stream.pickle")
    snap["allocator_settings"]["garbage_collection_threshold"] = float("nan")
    with pytest.raises(ValueError) as ei:
        tcuda.whatif(snap)
    assert "snapshot['allocator_settings']['garbage_collection_threshold']" in str(ei.value)
    snap = _load("side_stream.pickle")
    snap["segments"][0]["blocks"] = {(1, 2): 3}
    with pytest.raises(TypeError) as ei:
        tcuda.whatif(snap)
    assert "snapshot['segments'][0]['blocks'] has a key (1, 2) of type tuple" in str(ei.value)


@pytest.mark.parametrize("kwargs, exc, words", [
    (dict(snapshot=123), TypeError, "snapshot"),
    (dict(snapshot=b"/tmp/x.pickle"), TypeError, "snapshot"),
    (dict(snapshot=[1, 2]), TypeError, "snapshot"),
    (dict(configs="expandable_segments:True"), TypeError, "configs"),
    (dict(configs=[1]), TypeError, "configs[0]"),
    (dict(configs=["max_split_size_mb:128", None]), TypeError, "configs[1]"),
    (dict(configs=[]), ValueError, "configs"),
    (dict(configs=["a\0b"]), ValueError, "configs[0]"),
    (dict(configs=["max_split_size_mb:128"] * 256), ValueError, "configs"),
    (dict(capacity=[80]), TypeError, "capacity"),
    (dict(capacity="80XB"), ValueError, "capacity '80XB': unknown unit"),
    (dict(capacity="1MiB"), ValueError, "under 2 MiB"),
    (dict(capacity=0), ValueError, "capacity"),
    (dict(capacity=True), TypeError, "capacity"),
    (dict(capacity=1 << 64), OverflowError, "capacity"),
    (dict(fraction="0.5"), TypeError, "fraction"),
    (dict(fraction=0), ValueError, "fraction"),
    (dict(fraction=1.5), ValueError, "fraction"),
    (dict(fraction=float("nan")), ValueError, "fraction"),
    (dict(device=-1), ValueError, "device"),
    (dict(device=1.0), TypeError, "device"),
    (dict(threads="2"), TypeError, "threads"),
    (dict(threads=0), ValueError, "threads 0 is not a valid thread count: at least 1"),
    (dict(threads=257), ValueError, "threads 257 is not a valid thread count: at most 256"),
    (dict(device=1024), ValueError, "device 1024 is not a valid device index: at most 1023"),
    (dict(series_points=-5), ValueError, "series_points"),
    (dict(max_input=b"1GiB"), TypeError, "max_input"),
    (dict(max_input="lots"), ValueError, "max_input 'lots'"),
    (dict(max_input=0), ValueError, "max_input"),
    (dict(work_budget=-1), ValueError, "work_budget"),
    (dict(work_budget=1 << 64), OverflowError, "work_budget"),
])
def test_bad_arguments(kwargs, exc, words):
    kw = dict(snapshot=SMALL)
    kw.update(kwargs)
    with pytest.raises(exc) as ei:
        tcuda.whatif(**kw)
    assert words in str(ei.value)


def _raises(call, name, *fragments):
    with pytest.raises(tcuda.TcudaError) as ei:
        call()
    assert ei.value.name == name, (ei.value.name, str(ei.value))
    for f in fragments:
        assert f in str(ei.value), (f, str(ei.value))


def test_library_errors_carry_its_message(tmp_path):
    missing = str(tmp_path / "missing.pickle")
    _raises(lambda: tcuda.whatif(missing), "TCUDA_ERROR_IO", "tcuda_whatif_file", "missing.pickle")
    evil = tmp_path / "evil.pickle"
    with open(evil, "wb") as f:
        pickle.dump(os.system, f)
    _raises(lambda: tcuda.whatif(str(evil)), "TCUDA_ERROR_PARSE", "GLOBAL")
    _raises(lambda: tcuda.whatif({"a": 1}), "TCUDA_ERROR_PARSE", "tcuda_whatif_buffer")
    _raises(lambda: tcuda.whatif(SMALL, configs=["bogus:1"]), "TCUDA_ERROR_CONFIG", "bogus")
    _raises(lambda: tcuda.whatif(SMALL, device=3), "TCUDA_ERROR_INVALID_ARGUMENT", "device 3")


def test_lone_surrogates_read_as_the_pickle_path_reads_them(tmp_path):
    # json.dumps writes a str's lone surrogate (a file name decoded with
    # surrogateescape) as a \udcxx escape, which the library refuses; the
    # dict path hands it over as the pickle path does: U+FFFD.
    snap = _load("side_stream.pickle")
    for e in snap["device_traces"][0]:
        e["frames"] = [{"name": "step\udc80", "filename": "/data/\udcff\ud800.py", "line": 7}]
    path = tmp_path / "surrogates.pickle"
    with open(path, "wb") as f:
        pickle.dump(snap, f)
    by_dict = tcuda.whatif(snap, configs=CONFIGS, capacity=1 << 30, fraction=0.001)  # an OOM at once
    by_path = tcuda.whatif(str(path), configs=CONFIGS, capacity=1 << 30, fraction=0.001)
    assert by_dict == by_path
    frames = [r["first_oom"]["frames"] for r in by_dict["configs"] if r["first_oom"]]
    assert frames and frames[0][0] == {"name": "step\ufffd", "filename": "/data/\ufffd\ufffd.py", "line": 7}


def test_a_dict_that_contains_itself_is_a_value_error():
    snap = _load("side_stream.pickle")
    snap["segments"][0]["blocks"].append(snap)
    with pytest.raises(ValueError) as ei:
        tcuda.whatif(snap)
    assert "snapshot['segments'][0]['blocks'][1] contains itself" in str(ei.value)
    loop = []
    loop.append(loop)
    snap = _load("side_stream.pickle")
    snap["allocator_settings"]["x"] = loop
    with pytest.raises(ValueError) as ei:
        tcuda.whatif(snap)
    assert "snapshot['allocator_settings']['x'][0] contains itself" in str(ei.value)


def test_max_input_and_work_budget_reach_the_library(small_dict):
    size = os.path.getsize(SMALL)
    _raises(lambda: tcuda.whatif(SMALL, max_input=size - 1), "TCUDA_ERROR_IO", "tcuda_whatif_file: " + SMALL,
            "larger than the input cap of %d bytes" % (size - 1))
    assert tcuda.whatif(SMALL, configs=CONFIGS, max_input=size)["snapshot"]["requests"] > 0
    _raises(lambda: tcuda.whatif(SMALL, work_budget=100), "TCUDA_ERROR_PARSE", "budget of 100 units")
    _raises(lambda: tcuda.whatif(small_dict, work_budget=100), "TCUDA_ERROR_PARSE", "budget of 100 units")


# ---- inputs: sizes with units, gzip, standard input; the CLI's rules ----

CLI = os.environ.get("TCUDA_CLI")


def _cli(*args, stdin=None):
    if not CLI or not os.path.exists(CLI):
        pytest.skip("TCUDA_CLI is not set (tests/unit/python_pkg.sh sets it)")
    return subprocess.run([CLI, *args], stdin=stdin, capture_output=True, text=True)


SIZES = [("80GiB", 80 << 30), ("80GB", 80 * 10**9), ("1.5GiB", 3 << 29), ("0x40000000", 1 << 30),
         ("150109880320", 150109880320), ("2 MiB", 2 << 20), ("2.5kB", 2500)]


@pytest.mark.parametrize("text,expected", SIZES)
def test_parse_size_reads_the_units(text, expected):
    assert tcuda.parse_size(text) == expected
    assert tcuda.parse_size(expected) == expected


@pytest.mark.parametrize("text", ["80XB", "0", "-1", "1.3B", "", "GiB", "1e9", "99999999999999999999"])
def test_parse_size_refuses_what_the_cli_refuses(text):
    with pytest.raises(ValueError) as ei:
        tcuda.parse_size(text, "capacity")
    py = str(ei.value)
    r = _cli("whatif", "--capacity", text, SMALL)
    assert r.returncode == 2, r.stderr
    first = r.stderr.splitlines()[0]
    # the same words after the name: "--capacity '80XB': unknown unit ..." and "capacity '80XB': ..."
    assert first.startswith("tcuda whatif: --capacity "), first
    assert first[len("tcuda whatif: --"):] == py, (first, py)


@pytest.mark.parametrize("text", ["64MiB", "1.5GiB", "3000000000"])
def test_capacity_with_units_as_the_cli(text):
    doc = tcuda.whatif(SMALL, configs=CONFIGS, capacity=text)
    assert doc["snapshot"]["capacity"] == tcuda.parse_size(text)
    r = _cli("whatif", "--json", "--capacity", text, "--config", CONFIGS[0], "--config", CONFIGS[1], SMALL)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["snapshot"]["capacity"] == doc["snapshot"]["capacity"]


@pytest.mark.parametrize("args,kwargs,words", [
    (["--threads", "0"], dict(threads=0), "threads 0 is not a valid thread count: at least 1"),
    (["--threads", "300"], dict(threads=300), "threads 300 is not a valid thread count: at most 256"),
    (["--device", "1024"], dict(device=1024), "device 1024 is not a valid device index: at most 1023"),
    (["--capacity", "1MiB"], dict(capacity="1MiB"), "under 2 MiB"),
])
def test_the_cli_and_python_refuse_alike(args, kwargs, words):
    with pytest.raises(ValueError) as ei:
        tcuda.whatif(SMALL, **kwargs)
    assert words in str(ei.value)
    r = _cli("whatif", *args, SMALL)
    assert r.returncode == 2 and words in r.stderr, r.stderr


def test_a_gzip_snapshot_reads_as_the_plain_one(tmp_path):
    gz = tmp_path / "side_stream.pickle.gz"
    with open(SMALL, "rb") as f:
        gz.write_bytes(gzip.compress(f.read()))
    assert tcuda.whatif(str(gz), configs=CONFIGS) == tcuda.whatif(SMALL, configs=CONFIGS)


def test_a_gzip_bomb_stops_at_the_input_cap(tmp_path):
    bomb = tmp_path / "bomb.pickle.gz"
    bomb.write_bytes(gzip.compress(b"\x80\x04" + bytes(8 << 20), 9))  # 8 MiB from a few KiB
    assert bomb.stat().st_size < 64 << 10
    _raises(lambda: tcuda.whatif(str(bomb), max_input="1MiB"), "TCUDA_ERROR_IO",
            "larger than the input cap of 1048576 bytes once decompressed")


def test_standard_input(tmp_path):
    code = ("import json, sys, tcuda; "
            "print(json.dumps(tcuda.whatif('-', configs=%r)['configs']))" % (CONFIGS,))
    env = dict(os.environ)
    with open(SMALL, "rb") as f:
        r = subprocess.run([sys.executable, "-c", code], stdin=f, capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == tcuda.whatif(SMALL, configs=CONFIGS)["configs"]


def test_compare_takes_the_same_inputs_and_sizes(tmp_path):
    b, a = os.path.join(DATA, "side_stream.pickle"), os.path.join(DATA, "graph_pool.pickle")
    gz = tmp_path / "graph_pool.pickle.gz"
    with open(a, "rb") as f:
        gz.write_bytes(gzip.compress(f.read()))
    plain = tcuda.whatif_compare(b, a, capacity="1GiB")
    assert plain == tcuda.whatif_compare(b, a, capacity=1 << 30)
    small = tcuda.whatif_compare(b, a, capacity="4MiB")  # the history does not fit: OOMs
    assert small == tcuda.whatif_compare(b, a, capacity=4 << 20) and small != plain
    zipped = tcuda.whatif_compare(b, str(gz), capacity=1 << 30)
    for side in ("before", "after", "change"):
        assert {k: v for k, v in zipped[side].items() if k != "path"} == \
            {k: v for k, v in plain[side].items() if k != "path"}
    with pytest.raises(ValueError, match="device 1024 is not a valid device index: at most 1023"):
        tcuda.whatif_compare(b, a, device=1024)
    with pytest.raises(ValueError, match="capacity '80XB': unknown unit"):
        tcuda.whatif_compare(b, a, capacity="80XB")
    r = _cli("compare", "--device", "1024", b, a)
    assert r.returncode == 2 and "device 1024 is not a valid device index: at most 1023" in r.stderr, r.stderr
