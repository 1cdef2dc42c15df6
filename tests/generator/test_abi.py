"""One C ABI description per library kind (ozaki_cutlass.generator.abi): every template
renders exactly its prototypes, the runtime binds exactly its ctypes signatures, and no
header or template restates what Python holds (ABI versions, prototypes, constants)."""

from __future__ import annotations

import ctypes
import math
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from ozaki_cutlass.generator import Arch, Epilogue, StagesVariant, abi, catalog, render
from ozaki_cutlass.generator.prologue import prologue_catalog
from ozaki_cutlass.generator.render import default_templates_dir, library_abi
from ozaki_cutlass.kernels import library
from ozaki_cutlass.kernels.gemm import GroupGemm, Int8Gemm
from ozaki_cutlass.kernels.library import KernelError, UnsupportedProblem
from ozaki_cutlass.kernels.prologue import PrologueGemm
from ozaki_cutlass.kernels.stages import CCrtConstants, CNonfiniteSource, Stages
from ozaki_cutlass.numerics import moduli
from ozaki_cutlass.templates import constants

REPO = Path(__file__).resolve().parents[2]
TEMPLATES = default_templates_dir()
HEADERS = sorted((TEMPLATES / "include" / "ozaki").iterdir())
KERNELS_DIR = REPO / "ozaki_cutlass" / "kernels"

#: Every catalogued variant of every kind, by kind.
VARIANTS = {
    "int8_gemm": catalog(full=True),
    "group_gemm": catalog(full=True, epilogue=Epilogue.PARTIAL_CRT),
    "stages": [StagesVariant(arch=a) for a in Arch],
    "prologue": prologue_catalog(),
}
#: The runtime class that loads each kind.
RUNTIME = {"int8_gemm": Int8Gemm, "group_gemm": GroupGemm, "stages": Stages, "prologue": PrologueGemm}

# An exported definition as rendered: OZAKI_EXPORT <return> <symbol>_<entry>(<params>) {
_EXPORTED = re.compile(r"^OZAKI_EXPORT\s+(?P<ret>[\w:\s\*]+?)\s*\b(?P<fn>\w+)\((?P<params>[^)]*)\)\s*\{",
                       re.MULTILINE)


def _parse(params: str) -> list[tuple[str, str]]:
    """[(C type, name)] of a C parameter list, whitespace normalized."""
    text = " ".join(params.split())
    if text == "void":
        return []
    out = []
    for item in text.split(","):
        ctype, _, name = item.strip().rpartition(" ")
        out.append((" ".join(ctype.replace("*", " * ").split()).replace(" *", "*"), name))
    return out


def exported(source: str) -> dict[str, tuple[str, list[tuple[str, str]]]]:
    """{function name: (return type, [(C type, name)])} of every OZAKI_EXPORT definition."""
    found = {}
    for m in _EXPORTED.finditer(source):
        assert m["fn"] not in found, f"{m['fn']} exported twice"
        found[m["fn"]] = (" ".join(m["ret"].split()).replace(" *", "*"), _parse(m["params"]))
    return found


def _expected(spec: abi.LibraryAbi, symbol: str) -> dict[str, tuple[str, list[tuple[str, str]]]]:
    return {f"{symbol}_{e.name}": (e.returns, [(p.ctype, p.name) for p in e.params]) for e in spec.entries}


@pytest.mark.parametrize("kind", sorted(VARIANTS))
def test_every_template_renders_exactly_the_spec_prototypes(kind):
    spec = abi.LIBRARIES[kind]
    assert VARIANTS[kind], kind
    for variant in VARIANTS[kind]:
        assert library_abi(variant) is spec, variant.name
        source = render(variant)
        assert exported(source) == _expected(spec, variant.symbol), variant.name
        version = re.search(rf"\b{variant.symbol}_abi_version\(void\) \{{ return (\d+); \}}", source)
        assert version and int(version[1]) == spec.version, variant.name
        assert source.count("#define OZAKI_ABI_RENDERED") == 1
        assert ("#define OZAKI_KERNEL_CONSTANTS" in source) is spec.kernel_constants


def test_the_prototype_parser_reads_what_it_should():
    text = "OZAKI_EXPORT const char* p_name(void) { return \"x\"; }\n" \
           "OZAKI_EXPORT int p_run(const ozaki::CrtConstants* consts,\n    int64_t n, void* x) {"
    assert exported(text) == {"p_name": ("const char*", []),
                              "p_run": ("int", [("const ozaki::CrtConstants*", "consts"), ("int64_t", "n"),
                                                ("void*", "x")])}


def test_templates_write_no_prototype_or_version_by_hand():
    for template in sorted(TEMPLATES.glob("*.j2")):
        code = [line for line in template.read_text().splitlines() if not line.lstrip().startswith("//")]
        assert not [line for line in code if "OZAKI_EXPORT" in line or "extern \"C\"" in line], template.name
        assert not [line for line in code if re.search(r"abi_version|kAbiVersion", line)
                    and "abi.prototype(\"abi_version\")" not in line], template.name


def test_headers_define_no_abi_version_no_export_macro_and_no_abi_struct():
    for header in HEADERS:
        text = header.read_text()
        assert not re.search(r"k\w*AbiVersion", text), header.name
        assert not re.search(r"#\s*define\s+OZAKI_EXPORT", text), header.name
        for struct in (abi.CRT_CONSTANTS, abi.NONFINITE_SOURCE):
            assert not re.search(rf"\bstruct\s+{struct.name}\s*\{{", text), (header.name, struct.name)


# --- ctypes --------------------------------------------------------------------------------
# C spelling -> (size in bytes, signed) on the LP64 hosts we build for: the check that the
# spec's ctypes mapping is right does not reuse it.
_C_SCALARS = {"int": (4, True), "int32_t": (4, True), "uint32_t": (4, False), "int64_t": (8, True),
              "size_t": (8, False), "double": (8, None), "cudaStream_t": (8, None)}


def _is_signed(t) -> bool:
    return t(-1).value == -1


@pytest.mark.parametrize("kind", sorted(abi.LIBRARIES))
def test_ctypes_signatures_agree_with_the_c_prototypes(kind):
    spec = abi.LIBRARIES[kind]
    for entry in spec.entries:
        assert len(entry.argtypes) == len(entry.params)
        for param, t in zip(entry.params, entry.argtypes):
            if param.pointer:
                if param.host:
                    assert issubclass(t, ctypes._Pointer), (entry.name, param.name)
                    pointee = t._type_
                    if param.pointee in _C_SCALARS:
                        size, signed = _C_SCALARS[param.pointee]
                        assert ctypes.sizeof(pointee) == size and _is_signed(pointee) == signed
                    else:
                        assert pointee is {s.name: s for s in (abi.CRT_CONSTANTS, abi.NONFINITE_SOURCE)}[
                            param.pointee].ctypes_type
                else:
                    assert t is ctypes.c_void_p, (entry.name, param.name)
            else:
                size, signed = _C_SCALARS[param.ctype]
                assert ctypes.sizeof(t) == size, (entry.name, param.name)
                if param.ctype == "double":
                    assert t is ctypes.c_double
                elif param.ctype == "cudaStream_t":
                    assert t is ctypes.c_void_p
                else:
                    assert _is_signed(t) == signed, (entry.name, param.name)
        assert entry.restype is {"int": ctypes.c_int, "size_t": ctypes.c_size_t,
                                 "const char*": ctypes.c_char_p}[entry.returns]


def test_the_abi_structs_render_as_their_ctypes_twins():
    source = render(StagesVariant(arch=Arch.SM90A))
    for struct in (abi.CRT_CONSTANTS, abi.NONFINITE_SOURCE):
        body = re.search(rf"struct {struct.name} \{{\n(.*?)\n\}};", source, re.DOTALL)[1]
        members = [re.match(r"\s*([\w\s\*]+?)\s*(\w+)((?:\[\d+\])*);", line).groups()
                   for line in body.splitlines()]
        cls = struct.ctypes_type
        assert [name for _, name, _ in members] == [name for name, _ in cls._fields_]
        for (ctype, name, dims), (_, t) in zip(members, cls._fields_):
            extents = [int(d) for d in re.findall(r"\[(\d+)\]", dims)]
            for extent in extents:
                assert issubclass(t, ctypes.Array) and t._length_ == extent, name
                t = t._type_
            assert ctypes.sizeof(t) == (8 if ctype.endswith("*") else _C_SCALARS[ctype][0]), name
        assert f"static_assert(sizeof({struct.name}) == {ctypes.sizeof(cls)}," in source
    assert CCrtConstants is abi.CRT_CONSTANTS.ctypes_type and CNonfiniteSource is abi.NONFINITE_SOURCE.ctypes_type
    # packed as declared, no padding: 2 + MAX_MODULI int32 (88 bytes, a multiple of 8), then
    # the doubles (MAX_MODULI + 3 rows of MAX_LIMBS)
    mods, limbs = constants.MAX_MODULI, constants.MAX_LIMBS
    assert ctypes.sizeof(CCrtConstants) == 4 * (2 + mods) + 8 * limbs * (mods + 3)


class _FakeFunction:
    def __init__(self, result):
        self.result, self.calls = result, []

    def __call__(self, *args):
        self.calls.append(args)
        return self.result


class _FakeLibrary:
    """A stand-in for a loaded library: every `<symbol>_<entry>` returns `results[entry]`
    (default: status 1 with "bad" as the message)."""

    def __init__(self, symbol: str, results: dict):
        self._symbol, self._results, self.functions = symbol, results, {}

    def __getattr__(self, name: str):
        entry = name.removeprefix(self._symbol + "_")
        return self.functions.setdefault(entry, _FakeFunction(self._results.get(entry, 1)))


def _load(cls, variant, monkeypatch, **results):
    spec = cls.ABI
    lib = _FakeLibrary(variant.symbol, {"abi_version": spec.version, "name": variant.name.encode(),
                                        "last_error": b"bad", "crt_constants_size": 824} | results)
    monkeypatch.setattr(library.ctypes, "CDLL", lambda path, mode=0: lib)
    art = SimpleNamespace(variant=variant, symbol=variant.symbol, library_path=Path("/nowhere.so"))
    return cls(art), lib


@pytest.mark.parametrize("kind", sorted(RUNTIME))
def test_the_runtime_binds_the_spec_signatures(kind, monkeypatch):
    cls, variant = RUNTIME[kind], VARIANTS[kind][0]
    assert cls.ABI is library_abi(variant)
    loaded, lib = _load(cls, variant, monkeypatch)
    assert set(lib.functions) == {e.name for e in cls.ABI.entries}
    for entry in cls.ABI.entries:
        fn = lib.functions[entry.name]
        assert fn.argtypes == entry.argtypes and fn.restype is entry.restype, entry.name


def test_a_library_of_another_abi_version_or_variant_is_refused(monkeypatch):
    variant = VARIANTS["int8_gemm"][0]
    with pytest.raises(KernelError, match="ABI version 99"):
        _load(Int8Gemm, variant, monkeypatch, abi_version=99)
    with pytest.raises(KernelError, match="built for variant 'other'"):
        _load(Int8Gemm, variant, monkeypatch, name=b"other")


def test_calls_pass_host_arrays_as_the_spec_types_and_raise_on_status(monkeypatch):
    group, lib = _load(GroupGemm, catalog("sm_80", epilogue=Epilogue.PARTIAL_CRT)[0], monkeypatch)
    mods = [256, 255, 253, 251][:group.group_size]
    with pytest.raises(UnsupportedProblem, match="bad"):
        group(4, 16, 64, mods, 1, 64, 2, 64, 3, 16)
    (args,) = lib.functions["run"].calls
    assert isinstance(args[12], ctypes.c_uint32 * len(mods)) and list(args[12]) == mods
    stages, lib = _load(Stages, StagesVariant(arch=Arch.SM80), monkeypatch, combine_unscale=2)
    with pytest.raises(KernelError, match=r"stages_sm80\.combine_unscale: bad"):
        stages.combine_unscale(1, [4, 4], 2, 2, 2, 4, moduli.crt_constants(8), 1, 2, 1.0, 0.0, 0, 0, 0,
                               3, 2, 1, None, 0)
    (args,) = lib.functions["combine_unscale"].calls
    assert isinstance(args[2], ctypes.c_int32 * 2) and list(args[2]) == [4, 4]
    assert isinstance(args[7], type(ctypes.byref(CCrtConstants())))


def test_kernels_write_no_ctypes_signature_by_hand():
    """Only library.bind sets argtypes, from the spec; no scalar ctypes type is spelled
    in ozaki_cutlass/kernels."""
    sources = {p.name: p.read_text() for p in KERNELS_DIR.glob("*.py")}
    setters = [(name, line) for name, text in sources.items() for line in text.splitlines()
               if re.search(r"\.(argtypes|restype)\s*=", line) or re.search(r"\b(arg|res)type", line)
               and "=" in line and "entry." not in line]
    assert setters == [("library.py", "            fn.restype, fn.argtypes = entry.restype, entry.argtypes")]
    spelled = [(name, m[0]) for name, text in sources.items()
               for m in re.finditer(r"\bc_(?:u?int\d*|void_p|double|size_t|char_p|long|ulong)\b|POINTER\(", text)]
    assert spelled == []


# --- constants ------------------------------------------------------------------------------
def test_the_rendered_constants_are_the_python_values():
    prelude = abi.STAGES.prelude()
    for constant in constants.KERNEL_CONSTANTS:
        value = constant.value if isinstance(constant.value, int) else \
            "{" + ", ".join(map(str, constant.value)) + "}"
        assert re.search(rf"inline constexpr {constant.cxx_type} {constant.cxx_name}(\[\d+\])? = "
                         rf"{re.escape(str(value))};", prelude), constant.cxx_name
    # the numerics use the same objects, not copies
    for name in ("MODULI_TABLE", "MAX_MODULI", "LIMB_BITS", "LIMBS_OF_COUNT", "K_CHUNK", "COARSE_BITS",
                 "partial_bytes"):
        assert getattr(moduli, name) is getattr(constants, name), name
    assert constants.MAX_MODULI == len(constants.MODULI_TABLE)
    assert moduli.crt_constants(constants.MAX_MODULI).limbs == constants.MAX_LIMBS
    # each count's limbs hold its product, and one fewer would not
    for count in range(moduli.MIN_MODULI, constants.MAX_MODULI + 1):
        limbs = moduli.crt_constants(count).limbs
        bits = math.prod(constants.MODULI_TABLE[:count]).bit_length()
        assert limbs == constants.LIMBS_OF_COUNT[count]
        assert constants.LIMB_BITS * (limbs - 1) < bits <= constants.LIMB_BITS * limbs, count
    assert constants.K_CHUNK < constants.EXACT_K_LIMIT and 128 * 128 * constants.EXACT_K_LIMIT == 2**31


def _python_constant_names() -> list[str]:
    return [name for name in constants.__all__ if name.isupper() and name != "KERNEL_CONSTANTS"]


@pytest.mark.parametrize("path", HEADERS + sorted(TEMPLATES.glob("*.j2")), ids=lambda p: p.name)
def test_no_header_or_template_mirrors_a_python_constant(path):
    text = path.read_text()
    # by name: a comment such as "// numerics.COARSE_BITS" marks a copy
    mirrored = [m[0] for m in re.finditer(r"\b(?:numerics|reference|moduli|constants)\._?[A-Z][A-Z0-9_]*\b", text)]
    mirrored += [name for name in _python_constant_names() if re.search(rf"\b_?{name}\b", text)]
    assert mirrored == [], f"{path.name} restates Python constants: {mirrored}"
    # by definition: the rendered constants are defined nowhere else
    defined = [c.cxx_name for c in constants.KERNEL_CONSTANTS
               if re.search(rf"\b{c.cxx_name}\s*(\[[^\]]*\])?\s*=(?!=)", text)]
    assert defined == [], f"{path.name} defines rendered constants: {defined}"
