"""kernels.library.locate's per-process memo: artifacts found once per variant and directory, and
the default directory keyed by OZAKI_CACHE_DIR (a process that changes it looks there)."""

from types import SimpleNamespace

from ozaki_cutlass.kernels import library as kernels
from ozaki_cutlass.kernels.library import LoadedKernels
from ozaki_cutlass.generator import default_variant


def test_locate_memo_follows_the_cache_dir(tmp_path, monkeypatch):
    lib = tmp_path / "lib.so"
    lib.write_bytes(b"")
    calls = []

    def fake_locate(variant, out_dir=None, **kw):
        calls.append((variant.name, out_dir))
        return SimpleNamespace(library_path=lib)

    monkeypatch.setattr(kernels, "_locate", fake_locate)
    monkeypatch.setattr(kernels, "KERNELS", LoadedKernels())
    v = default_variant("sm_90a")
    monkeypatch.setenv("OZAKI_CACHE_DIR", str(tmp_path / "a"))
    kernels.locate(v)
    kernels.locate(v)
    assert len(calls) == 1  # memoized
    monkeypatch.setenv("OZAKI_CACHE_DIR", str(tmp_path / "b"))
    kernels.locate(v)
    assert len(calls) == 2  # another default directory: looked up again
    kernels.locate(v, tmp_path / "explicit")
    kernels.locate(v, tmp_path / "explicit")
    assert calls[2:] == [(v.name, tmp_path / "explicit")]
    lib.unlink()  # a vanished artifact is looked up again
    kernels.locate(v, tmp_path / "explicit")
    assert len(calls) == 4
