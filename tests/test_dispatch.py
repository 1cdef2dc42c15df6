"""The shape dispatcher: a pure function of (problem, arch, table)."""

import json
import re

import pytest

from ozaki_cutlass import dispatch
from ozaki_cutlass.dispatch import Problem, choose
from ozaki_cutlass.generator import Arch, Epilogue, catalog, default_variant
from ozaki_cutlass.numerics.moduli import K_CHUNK
from ozaki_cutlass.paths.native import decision_key


def test_builtin_default_is_the_staged_default_kernel():
    c = choose(Problem(4096, 4096, 4096, 15, Arch.SM90A))
    assert (c.path, c.variant, c.source) == ("staged", default_variant(Arch.SM90A), "built-in")


def test_fused_when_asked():
    c = choose(Problem(4096, 4096, 4096, 15, Arch.SM90A), path="fused")
    assert c.path == "fused" and c.variant in catalog(Arch.SM90A, epilogue=Epilogue.PARTIAL_CRT)


def test_sm80_gets_the_staged_default():
    c = choose(Problem(4096, 4096, 4096, 15, Arch.SM80))
    assert c.path == "staged" and c.variant == default_variant(Arch.SM80)


def test_long_k_falls_back_to_staged():
    c = choose(Problem(64, 64, K_CHUNK + 1, 15, Arch.SM90A))
    assert c.path == "staged"


def test_path_override():
    assert choose(Problem(4096, 4096, 4096, 15, Arch.SM90A), path="staged").path == "staged"
    with pytest.raises(ValueError, match="path must be one of"):
        choose(Problem(8, 8, 8, 15, Arch.SM90A), path="magic")


def test_table_entries_first_and_buckets():
    fused = catalog(Arch.SM90A, epilogue=Epilogue.PARTIAL_CRT)
    plain = catalog(Arch.SM90A)
    table = {"entries": [
        {"arch": "sm_90a", "path": "staged", "kernel": plain[1].name, "m": [1, 1000], "n": [1, 1000], "k": [1, 1000]},
        {"arch": "sm_90a", "path": "fused", "kernel": fused[-1].name, "m": [1001, 99999], "n": [1, 99999], "k": [1, 99999]},
    ]}
    small = choose(Problem(500, 600, 700, 15, Arch.SM90A), table=table, table_source="t.json")
    assert (small.path, small.variant, small.source) == ("staged", plain[1], "t.json")
    big = choose(Problem(5000, 600, 700, 15, Arch.SM90A), table=table, table_source="t.json")
    assert (big.path, big.variant) == ("fused", fused[-1])
    # outside every bucket: the built-in candidates
    assert choose(Problem(500, 5000, 700, 15, Arch.SM90A), table=table).source == "built-in"


def test_nothing_fits_names_shape_and_every_reason(monkeypatch):
    monkeypatch.setattr(dispatch.candidates, "builtin_candidates", lambda arch: [])
    table = {"entries": [{"arch": "sm_90a", "path": "staged", "kernel": catalog(Arch.SM90A)[0].name}]}
    with pytest.raises(dispatch.NoKernelError) as err:
        choose(Problem(7, 9, 11, 15, Arch.SM80), table=table)
    text = str(err.value)
    assert "m=7, n=9, k=11" in text and "built for sm_90a, the GPU needs sm_80" in text


def test_sm80_kernels_run_on_sm90():
    assert dispatch.runs_on(Arch.SM80, Arch.SM90A) and not dispatch.runs_on(Arch.SM90A, Arch.SM80)


def test_bad_table_entry():
    with pytest.raises(ValueError, match="path"):
        dispatch.candidates_from_table({"entries": [{"path": "x", "kernel": "y"}]}, "t.json")
    with pytest.raises(ValueError, match="matches 0"):
        dispatch.candidates_from_table({"entries": [{"path": "fused", "kernel": "no_such"}]}, "t.json")


def test_packaged_table_loads():
    table, source = dispatch.load_table()
    assert isinstance(table.get("entries", []), list)
    dispatch.candidates_from_table(table, source)  # every entry names a catalogued kernel


_STAGED = {"arch": "sm_90a", "path": "staged", "kernel": "i8_sm90a_128x128x128_c1x1_pp_s0_int32_g1"}
_FUSED = "i8_sm90a_128x128x128_c2x1_coop_s0_pcrt_g4_sw8"

# (what the file holds, what the error must say is wrong)
_MALFORMED_TABLES = {
    "not JSON": ("{'entries': []}", "is not JSON"),
    "not an object": ("[]", "top level is a JSON array, not an object"),
    "no entries": ('{"gpu": "H200"}', 'no "entries" list'),
    "entries not a list": ('{"entries": {"path": "native"}}', '"entries" is a JSON object, not a list'),
    "entry not an object": ('{"entries": ["native"]}', "entry 0 is a JSON string, not an object"),
    "no path": ({"entries": [{"kernel": _STAGED["kernel"]}]}, "entry 0 has no \"path\""),
    "unknown path": ({"entries": [_STAGED | {"path": "fast"}]}, "entry 0 has path 'fast'"),
    "no kernel": ({"entries": [{"path": "staged"}]}, "entry 0 has no \"kernel\""),
    "kernel not a string": ({"entries": [_STAGED | {"kernel": 7}]}, "entry 0 has \"kernel\": 7"),
    "unknown kernel": ({"entries": [_STAGED | {"kernel": "i8_nothing"}]}, "matches 0 catalogued variants"),
    "kernel of the other path": ({"entries": [_STAGED | {"kernel": _FUSED}]}, "runs the fused path"),
    "unknown arch": ({"entries": [_STAGED | {"arch": "sm_75"}]}, "entry 0 has arch 'sm_75'"),
    "kernel of another arch": ({"entries": [_STAGED | {"arch": "sm_80"}]}, "built for sm_90a"),
    "bucket not a pair": ({"entries": [_STAGED | {"m": 64}]}, "entry 0 has \"m\": 64"),
    "bucket of strings": ({"entries": [_STAGED | {"n": ["1", "64"]}]}, "entry 0 has \"n\": ['1', '64']"),
    "bucket upside down": ({"entries": [_STAGED | {"k": [64, 1]}]}, "entry 0 has \"k\": [64, 1]"),
    "time not a number": ({"entries": [_STAGED | {"ms": "fast", "native_ms": 2.0}]}, "entry 0 has \"ms\": 'fast'"),
    "second entry": ({"entries": [_STAGED, {"path": "native", "m": [1]}]}, "entry 1 has \"m\": [1]"),
    # nesting beyond what json.loads or repr can recurse through, or beyond what a table needs
    "100000-deep array": ("[" * 100000 + "]" * 100000, "nests more than 32 levels deep"),
    "100000-deep bucket": ('{"entries": [{"path": "native", "m": ' + "[" * 100000 + "]" * 100000 + "}]}",
                           "nests more than 32 levels deep"),
    "900-deep bucket": ('{"entries": [{"path": "native", "m": ' + "[" * 900 + "]" * 900 + "}]}",
                        "nests more than 32 levels deep"),
    "900-deep metadata": ('{"gpu": ' + "[" * 900 + "]" * 900 + ', "entries": []}', "nests more than 32 levels deep"),
    # a value in the message is shortened: the table is the user's, of any size
    "long kernel list": ({"entries": [_STAGED | {"kernel": list(range(100000))}]},
                         "entry 0 has \"kernel\": [0, 1, 2, 3, 4, 5, ...], expected"),
    "nested bucket": ({"entries": [_STAGED | {"m": [[[[[1, 2]]]], "x" * 1000]}]}, "has \"m\": [[[[...]]], 'xxx"),
}


def _use_table(tmp_path, monkeypatch, content) -> str:
    path = tmp_path / "tuning.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    monkeypatch.setenv("OZAKI_TUNING_TABLE", str(path))
    return str(path)


def _dispatch_with_the_table():
    """What a GEMM call does with the table in effect: load it, choose, ask the auto policy."""
    table, source = dispatch.load_table()
    problem = Problem(64, 64, 64, 15, Arch.SM90A)
    choose(problem, table=table, table_source=source)
    dispatch.prefer_native(problem, "accurate", table=table, table_source=source)


@pytest.mark.parametrize("content, wrong", _MALFORMED_TABLES.values(), ids=_MALFORMED_TABLES.keys())
def test_malformed_table_from_the_environment_says_what_and_how_to_fix(tmp_path, monkeypatch, content, wrong):
    path = _use_table(tmp_path, monkeypatch, content)
    with pytest.raises(ValueError) as err:
        _dispatch_with_the_table()
    text = str(err.value)
    assert f"OZAKI_TUNING_TABLE={path}" in text and wrong in text
    assert "unset OZAKI_TUNING_TABLE" in text and "ozaki-cutlass tune" in text
    assert len(text.replace(path, "")) < 300 and "\n" not in text  # one line, whatever the table holds


def test_missing_table_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("OZAKI_TUNING_TABLE", str(tmp_path / "nowhere.json"))
    with pytest.raises(ValueError) as err:
        _dispatch_with_the_table()
    text = str(err.value)
    assert f"OZAKI_TUNING_TABLE={tmp_path / 'nowhere.json'}" in text and "cannot be read" in text
    assert "unset OZAKI_TUNING_TABLE" in text and "ozaki-cutlass tune" in text


def test_malformed_table_given_by_path(tmp_path):
    path = tmp_path / "t.json"
    path.write_text('{"entries": [{"path": "staged"}]}')
    with pytest.raises(ValueError, match="no \"kernel\"") as err:
        dispatch.load_table(str(path))
    assert f"tuning table {path}" in str(err.value) and "OZAKI_TUNING_TABLE" not in str(err.value)
    with pytest.raises(ValueError, match="cannot be read"):
        dispatch.load_table(str(tmp_path / "nowhere.json"))


@pytest.mark.parametrize("table", [{"entries": [{"path": "staged"}]}, {"entries": [_STAGED | {"m": [1]}]},
                                   {"entries": "none"}, {"entries": [None]}])
def test_malformed_table_given_as_a_dict(table):
    with pytest.raises(ValueError, match="^t.json: .*ozaki-cutlass tune"):
        dispatch.candidates_from_table(table, "t.json")


_NATIVE = {"path": "native", "m": [0, 10], "n": [0, 10], "k": [0, 10]}


@pytest.mark.parametrize("entry, words", [
    (_STAGED | {"ms": float("nan"), "native_ms": 5.0},
     'has "ms": nan, expected milliseconds (a finite number above 0)'),
    (_STAGED | {"ms": -1.0}, 'has "ms": -1.0, expected milliseconds'),
    (_STAGED | {"ms": 0}, 'has "ms": 0, expected milliseconds'),
    (_STAGED | {"native_ms": float("inf")}, 'has "native_ms": inf, expected milliseconds'),
    ({"path": "native", "M": [0, 10], "n": [0, 10], "k": [0, 10]}, "has 'M', not a key of a table entry"),
    (_STAGED | {"complx": True}, "has 'complx', not a key of a table entry"),
    (_NATIVE | {"kernel": "x"}, 'has a "kernel", but a native entry runs cuBLAS DGEMM'),
])
def test_entries_that_would_decide_silently_wrong_are_refused(entry, words):
    """A NaN, infinite or negative time, or a misspelt key (which would widen the bucket or
    drop a restriction), would steer calls without a word: the table is refused instead."""
    with pytest.raises(ValueError, match=re.escape(f"entry 0 {words}")):
        dispatch.candidates_from_table({"entries": [entry]}, "t.json")
    assert dispatch.table_problem({"entries": [_STAGED | {"ms": 1.5, "native_ms": 2.0}, _NATIVE]}) is None


# --------------------------------------------------------------------------- auto policy

def test_auto_policy_table_decides_first():
    table = {"entries": [
        {"arch": "sm_90a", "path": "native", "m": [1, 2000], "n": [1, 2000], "k": [1, 2000]},
        {"arch": "sm_90a", "path": "staged", "kernel": default_variant(Arch.SM90A).name,
         "m": [2001, 9000], "n": [2001, 9000], "k": [2001, 9000], "ms": 10.0, "native_ms": 20.0},
        {"arch": "sm_90a", "path": "staged", "kernel": default_variant(Arch.SM90A).name,
         "m": [9001, 99999], "n": [9001, 99999], "k": [9001, 99999], "ms": 30.0, "native_ms": 20.0},
        {"arch": "sm_90a", "path": "staged", "kernel": default_variant(Arch.SM90A).name,  # 1 % faster
         "m": [100000, 199999], "n": [1, 99999], "k": [1, 99999], "ms": 10.0, "native_ms": 10.1},
    ]}
    def native(m, n, k, arch=Arch.SM90A):
        return dispatch.prefer_native(Problem(m, n, k, 15, arch), "accurate", table=table, table_source="t")

    assert native(100, 100, 100) == (True, "t: native DGEMM measured faster in this bucket")
    assert native(3000, 3000, 3000)[0] is False
    assert native(20000, 20000, 20000)[0] is True            # the kernel entry's native_ms is lower
    assert native(150000, 100, 100) == (True, "t: emulation not measured 1.05x faster than native DGEMM in this "
                                              "bucket")      # within the margin
    # native entries are not kernels: choose() skips them
    assert choose(Problem(100, 100, 100, 15, Arch.SM90A), table=table).source == "built-in"
    # another arch's entries do not apply
    assert "no measurement" in native(100, 100, 100, Arch.SM80)[1]


def test_complex_entries_serve_complex_calls_alone():
    """An entry marked "complex" (tune --zgemm) decides a complex call's realified product
    (kernel and native-or-not) and is passed over for a real call of the same shape; the
    unmarked entries serve both. The auto decisions are remembered apart."""
    fused, staged = catalog(Arch.SM90A, epilogue=Epilogue.PARTIAL_CRT)[0], default_variant(Arch.SM90A)
    box = {"m": [1000, 99999], "n": [1000, 99999], "k": [1000, 99999]}
    table = {"entries": [
        {"arch": "sm_90a", "path": "staged", "kernel": staged.name, "complex": True, "ms": 10.0, "native_ms": 20.0}
        | box,
        {"arch": "sm_90a", "path": "fused", "kernel": fused.name, "ms": 30.0, "native_ms": 20.0} | box,
    ]}
    real, cplx = Problem(4096, 8192, 8192, 15, Arch.SM90A), Problem(4096, 8192, 8192, 15, Arch.SM90A, realified=True)
    assert (choose(cplx, table=table).path, choose(real, table=table).path) == ("staged", "fused")
    assert dispatch.prefer_native(cplx, "fast", table=table)[0] is False
    assert dispatch.prefer_native(real, "fast", table=table)[0] is True
    with pytest.raises(ValueError, match='entry 0 has "complex": 1, expected true or false'):
        dispatch.candidates_from_table({"entries": [table["entries"][0] | {"complex": 1}]}, "t.json")
    assert decision_key(1, 2, 3, "fast", 0) != decision_key(1, 2, 3, "fast", 0, realified=True)


def test_default_call_entries_serve_contract_calls_alone():
    """An entry marked "calls": "default" (tune, where the fastest default call and the
    fastest call at the table's count run different kernels) is chosen for calls under the
    accuracy contract alone; a call that names a count passes over it, with or without a
    path. The auto policy reads its native_ms either way (its decision is the default
    call's)."""
    fused = catalog(Arch.SM90A, epilogue=Epilogue.PARTIAL_CRT)
    staged = default_variant(Arch.SM90A)
    box = {"m": [1000, 99999], "n": [1000, 99999], "k": [1000, 99999]}
    table = {"entries": [
        {"arch": "sm_90a", "path": "fused", "kernel": fused[0].name, "calls": "default", "ms": 10.0,
         "native_ms": 20.0} | box,
        {"arch": "sm_90a", "path": "fused", "kernel": fused[1].name, "ms": 9.0} | box,
        {"arch": "sm_90a", "path": "staged", "kernel": staged.name, "ms": 11.0} | box,
    ]}
    named = Problem(4096, 4096, 4096, 15, Arch.SM90A)
    default = Problem(4096, 4096, 4096, 15, Arch.SM90A, contract=True)
    assert choose(default, table=table).variant == fused[0]
    assert choose(default, table=table, path="fused").variant == fused[0]
    assert choose(default, table=table, path="staged").variant == staged
    assert choose(named, table=table).variant == fused[1]
    assert choose(named, table=table, path="fused").variant == fused[1]
    assert choose(named, table=table, path="staged").variant == staged
    assert dispatch.prefer_native(default, "fast", table=table)[0] is False
    with pytest.raises(ValueError, match='entry 0 has "calls": .all., expected "default"'):
        dispatch.candidates_from_table({"entries": [table["entries"][0] | {"calls": "all"}]}, "t.json")
    # the rejection says why
    first = dispatch.candidates_from_table(table, "t.json")[0]
    assert first.rejection(default) is None and "the default call" in first.rejection(named)


def test_auto_policy_builtin_model():
    """Outside any table: the H200 cost model on sm_90 (native for small and skinny
    shapes, emulation for large cubes), the emulation kept elsewhere."""
    def native(m, n, k, arch=Arch.SM90A, mode="accurate"):
        return dispatch.prefer_native(Problem(m, n, k, 15, arch), mode)[0]

    assert native(1024, 1024, 1024) and native(16384, 16384, 256) and native(100000, 64, 4096)
    assert not native(16384, 16384, 16384) and not native(32768, 32768, 32768)
    assert not native(1024, 1024, 1024, Arch.SM80)
    model = dispatch.H200_MODEL
    # more GEMM work in accurate mode (the coarse GEMM), and more with more moduli
    assert model.emulated_ms(4096, 4096, 4096, 15, "accurate") > model.emulated_ms(4096, 4096, 4096, 15, "fast")
    assert model.emulated_ms(4096, 4096, 4096, 16, "fast") > model.emulated_ms(4096, 4096, 4096, 15, "fast")


def test_native_decision_without_cublas(monkeypatch):
    """The auto policy keeps emulating when libcublas cannot be loaded; policy='native'
    then fails with the loader's explanation instead of falling back silently."""
    from ozaki_cutlass.device import cublas
    from ozaki_cutlass.paths import native

    monkeypatch.setattr(cublas, "available", lambda: False)

    def missing():
        raise cublas.NativeUnavailable("libcublas not found (test)")

    monkeypatch.setattr(cublas, "library", missing)
    problem, table = Problem(64, 64, 64, 15, Arch.SM90A), ({"entries": []}, "no table")
    decision, why = native.decide("auto", False, problem, "accurate", 0, table)
    assert decision is False and "cuBLAS not available" in why
    with pytest.raises(cublas.NativeUnavailable, match="not found"):
        native.decide("native", False, problem, "accurate", 0, table)
    # an explicit moduli count, kernel or path asks for the emulation whatever the table says
    assert native.decide("auto", True, problem, "accurate", 0, table) == (False, "emulation asked for")


def test_emulation_asked_for_by_moduli_kernel_or_path():
    """What the auto policy counts as asking for the emulation: any of moduli, kernel, path."""
    from ozaki_cutlass.call import validate
    from ozaki_cutlass.device.arrays import Matrix

    class Dev:
        def __init__(self, shape):
            self.__cuda_array_interface__ = {"shape": shape, "typestr": "<f8", "data": (1 << 20, False),
                                             "version": 3, "strides": None}

    kernel = dispatch.builtin_candidates(Arch.SM90A)[0].variant.name
    for given, asked in ((dict(), False), (dict(moduli=15), True), (dict(kernel=kernel), True),
                         (dict(path="staged"), True)):
        args = dict(c=None, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, moduli=None, mode=None, out=None,
                    stream=None, kernel=None, path=None, policy="auto", timings=None) | given
        call = validate(Dev((3, 4)), Dev((4, 5)), **args)
        assert call.emulation_asked is asked, given
        assert isinstance(call.A, Matrix) and (call.m, call.n, call.k) == (3, 5, 4)


def test_fast_lane_decisions_are_bounded(monkeypatch):
    import os

    from ozaki_cutlass.dispatch.policy import AutoDecisions

    decisions = AutoDecisions()
    monkeypatch.setattr(decisions, "LIMIT", 3)
    for n in range(5):
        decisions.remember((n, n, n, "accurate", 0, os.environ.get("OZAKI_TUNING_TABLE")), True)
    assert 1 <= len(decisions.native) <= 3
    assert decisions.native[(4, 4, 4, "accurate", 0, os.environ.get("OZAKI_TUNING_TABLE"))] is True


@pytest.mark.parametrize("shape", [(3, 4, 0), (0, 4, 3), (3, 0, 5), (0, 0, 0)])
def test_empty_problems_have_a_kernel(shape):
    """m, n or k = 0: the pipeline launches nothing (k = 0 gives beta c), but it must not
    be refused by the dispatcher: the built-in candidates take every size from 0."""
    c = choose(Problem(*shape, 15, Arch.SM90A))
    assert (c.path, c.source) == ("staged", "built-in")
    assert choose(Problem(*shape, 15, Arch.SM80)).path == "staged"


def test_tests_run_without_the_developers_tuning_settings():
    """tests/conftest.py removes them (run the suite with OZAKI_TUNING_TABLE and
    OZAKI_OVERLAP set to see it matter): every test sees the package's defaults."""
    from ozaki_cutlass import config

    assert config.tuning_table() is None and config.overlap() is True
    assert config.karatsuba_min() == config.KARATSUBA_MIN_DEFAULT
    assert dispatch.load_table()[1] in ("ozaki_cutlass/data/tuning.json", "no table")


def test_forget_tables_rereads_the_file(tmp_path, monkeypatch):
    path = _use_table(tmp_path, monkeypatch, {"entries": []})
    table, source = dispatch.load_table()
    assert source == path and dispatch.candidates_from_table(table, source) == []
    (tmp_path / "tuning.json").write_text(json.dumps({"entries": [_STAGED]}))
    assert dispatch.load_table()[0] is table  # read once per process
    dispatch.forget_tables()
    table, source = dispatch.load_table()
    assert [c.variant.name for c in dispatch.candidates_from_table(table, source)] == [_STAGED["kernel"]]


def test_the_answer_under_a_kept_table_is_kept(tmp_path, monkeypatch):
    """choose() runs on every call: under a table load_table() keeps, each (problem, path)
    is worked out once, until forget_tables(); a table passed in as a plain dict is worked
    out every time (it may change). The kept answers are bounded."""
    fused = catalog(Arch.SM90A, epilogue=Epilogue.PARTIAL_CRT)[-1]
    _use_table(tmp_path, monkeypatch, {"entries": [{"arch": "sm_90a", "path": "fused", "kernel": fused.name}]})
    table, source = dispatch.load_table()
    worked = []
    first_fit = dispatch.candidates._first_fit
    monkeypatch.setattr(dispatch.candidates, "_first_fit", lambda *a: worked.append(a[0]) or first_fit(*a))
    p, q = Problem(4096, 4096, 4096, 15, Arch.SM90A), Problem(4096, 4096, 4097, 15, Arch.SM90A)
    answers = [choose(x, table=table, table_source=source, path=path)
               for x, path in ((p, None), (p, None), (p, "staged"), (q, None), (p, None))]
    assert worked == [p, p, q]
    assert answers[0] == answers[1] == answers[4] and answers[0].variant == fused
    assert answers[2].path == "staged" and answers[3].variant == fused
    dispatch.forget_tables()
    assert choose(p, table=table, table_source=source) == answers[0] and worked == [p, p, q, p]
    plain = json.loads(json.dumps(table))
    choose(p, table=plain), choose(p, table=plain)
    assert worked[-2:] == [p, p]
    table, source = dispatch.load_table()
    monkeypatch.setattr(dispatch.candidates, "MAX_CHOICES", 2)
    for k in range(1, 6):
        choose(Problem(64, 64, k, 15, Arch.SM90A), table=table, table_source=source)
        assert len(dispatch.table.TABLES.choices) <= 2
