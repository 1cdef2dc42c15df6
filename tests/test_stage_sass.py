"""scripts/stage_sass.py's parsing of cuobjdump and ptxas output (no nvcc or GPU needed)."""

import pytest

from script_modules import SCRIPTS, load_script


@pytest.fixture
def sass(monkeypatch):
    monkeypatch.syspath_prepend(str(SCRIPTS))  # it imports ncu_mix from its folder, as when run
    return load_script(SCRIPTS / "stage_sass.py")

SASS = """
	code for sm_90a
		Function : _Z6kernelv
	.headerflags	@"EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                   /* 0x00000a00ff017b82 */
        /*0010*/                   IMAD.MOV.U32 R2, RZ, RZ, RZ ;            /* 0x000000ffff027224 */
        /*0020*/                   FFMA R3, R2, R2, R2 ;                    /* 0x0000000202037223 */
        /*0030*/              @!P0 FADD R3, R3, 1 ;                         /* 0x3f80000003038421 */
        /*0040*/              @P1 BRA 0x20 ;                                /* 0xfffffffc00001947 */
        /*0050*/                   BRA 0x60 ;                               /* 0x0000000000007947 */
        /*0060*/                   EXIT ;                                   /* 0x000000000000794d */
		Function : _Z5otherv
        /*0000*/                   EXIT ;                                   /* 0x000000000000794d */
"""

PTXAS = """ptxas info    : Compiling entry function '_Z6kernelv' for 'sm_90a'
ptxas info    : Function properties for _Z6kernelv
    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 96 registers, used 0 barriers
ptxas info    : Compiling entry function '_Z5otherv' for 'sm_90a'
ptxas info    : Used 8 registers
"""


def test_kernels_instructions_and_ptxas_figures(sass):
    kernels = sass.parse_sass(SASS)
    assert list(kernels) == ["_Z6kernelv", "_Z5otherv"]
    k = kernels["_Z6kernelv"]
    assert [a for a, _ in k.instructions] == [0x0, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60]
    assert [sass.opcode(t) for _, t in k.instructions] == ["LDC", "IMAD", "FFMA", "FADD", "BRA", "BRA", "EXIT"]
    sass.parse_ptxas(PTXAS, kernels)
    assert (k.registers, k.spill_stores, k.spill_loads) == (96, 4, 12)
    assert kernels["_Z5otherv"].registers == 8


def test_only_backward_branches_are_loops(sass):
    k = sass.parse_sass(SASS)["_Z6kernelv"]
    (start, end, mix), = sass.loops(k)  # the forward BRA 0x60 is no loop
    assert (start, end) == (0x20, 0x40)
    assert mix == {"FFMA": 1, "FADD": 1, "BRA": 1}
    assert "loop 0x00020-0x00040: 3 instructions" in sass.report(k, 5)


def test_the_cubin_command_drops_the_shared_library_flags(sass):
    line = ["nvcc", "-std=c++17", "-O3", "-shared", "-Xcompiler", "-fPIC", "-I/inc",
            "-gencode=arch=compute_90a,code=sm_90a", "-L/lib", "s.cu", "-o", "libs.so", "-lcuda"]
    assert sass.cubin_command(line, "sm_90a", "s.cubin") == [
        "nvcc", "-std=c++17", "-O3", "-I/inc", "s.cu", "-cubin", "-arch=sm_90a", "-Xptxas", "-v", "-o", "s.cubin"]


def test_compare_names_kernels_gone_new_and_changed_not_moved(sass):
    before = sass.parse_sass(SASS)
    after = sass.parse_sass(SASS.replace("_Z5otherv", "_Z5thirdv")
                            .replace("/*0000*/                   LDC", "/*0008*/                   LDC"))
    assert sass.compare(after, before) == {"gone": ["_Z5otherv"], "new": ["_Z5thirdv"], "changed": []}
    after = sass.parse_sass(SASS.replace("FADD R3, R3, 1", "FADD R3, R3, 2"))
    assert sass.compare(after, before) == {"gone": [], "new": [], "changed": ["_Z6kernelv"]}
