"""scripts/ncu_mix.py: Nsight Compute's SASS source page read back, instructions and stall
samples summed per opcode."""

import json
import subprocess
import sys

import pytest

from script_modules import SCRIPTS, load_script

SCRIPT = SCRIPTS / "ncu_mix.py"


@pytest.fixture(scope="module")
def mix():
    return load_script(SCRIPT)


HEADER = ('"Address","Source","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)",'
          '"Instructions Executed","Thread Instructions Executed","stall_wait","stall_math",'
          '"stall_wait (Not Issued)"')


def line(address, sass, samples, executed, wait, math):
    return f'"{address}","{sass}","{samples}","0","{executed:,}","0","{wait}","{math}","99"'


def kernel(name, rows):
    return [f'"Kernel Name","{name}",', HEADER] + rows


def page(*kernels):
    return "\n".join(text for k in kernels for text in k) + "\n"


FIRST = kernel("void combine<3>(Args)", [
    line("0x10", "      DFMA R2, R4, R6, R2", 30, 3000, 20, 10),
    line("0x20", "@P0   DFMA.RM R2, R4, R6, R2", 10, 1000, 10, 0),
    line("0x30", "      IMAD.WIDE.U32 R4, R5, 0x8, R2", 40, 2000, 30, 10),
    line("0x40", "      EXIT", 0, 0, 0, 0),
])
SECOND = kernel("void residues<0>(Args)", [line("0x10", "      FFMA R1, R2, R3, R1", 5, 800, 5, 0)])


def test_opcodes_are_summed_without_predicates_and_modifiers(mix):
    assert mix.opcode("@!P1  IMAD.WIDE.U32 R4, R5, 0x8, R2") == "IMAD"
    assert mix.opcode("      DFMA R2, R4, R6, R2") == "DFMA"
    assert mix.opcode("") == ""
    found = mix.kernels(page(FIRST).splitlines())
    res = mix.mix(found[0], entries=100)
    assert res["warp_instructions"] == 6000
    assert res["per_entry"] == pytest.approx(32 * 6000 / 100)
    by_op = {o["opcode"]: o for o in res["opcodes"]}
    assert set(by_op) == {"DFMA", "IMAD"}          # EXIT never ran: left out
    assert by_op["DFMA"]["warp_instructions"] == 4000 and by_op["DFMA"]["share"] == pytest.approx(4000 / 6000)
    assert by_op["DFMA"]["sample_share"] == pytest.approx(40 / 80)
    assert by_op["IMAD"]["per_entry"] == pytest.approx(32 * 2000 / 100)
    # the "(Not Issued)" columns are a subset of the others: not added again
    assert res["stalls"] == pytest.approx({"wait": 60 / 80, "math": 20 / 80})


def test_the_lines_with_the_most_samples(mix):
    res = mix.mix(mix.kernels(page(FIRST).splitlines())[0], entries=None, lines=2)
    assert "lines" not in mix.mix(mix.kernels(page(FIRST).splitlines())[0], entries=None)
    first, second = res["lines"]
    assert first["offset"] == 0x20 and first["sass"] == "IMAD.WIDE.U32 R4, R5, 0x8, R2"
    assert first["executed"] == 2000 and first["sample_share"] == pytest.approx(40 / 80)
    assert first["stalls"] == pytest.approx({"wait": 30 / 40, "math": 10 / 40})
    assert second["offset"] == 0 and second["sample_share"] == pytest.approx(30 / 80)
    # a line without samples is never listed, however many are asked for
    assert len(mix.mix(mix.kernels(page(FIRST).splitlines())[0], entries=None, lines=9)["lines"]) == 3


def test_each_launch_once_and_a_repeated_page_dropped(mix):
    found = mix.kernels(page(FIRST, FIRST, SECOND, SECOND).splitlines())
    assert [k["name"] for k in found] == ["void combine<3>(Args)", "void residues<0>(Args)"]
    # two launches of one kernel with different counts are two launches
    other = kernel("void combine<3>(Args)", [line("0x10", "      DFMA R2, R4, R6, R2", 1, 7, 1, 0)])
    assert len(mix.kernels(page(FIRST, other).splitlines())) == 2


def test_not_a_source_page_is_refused(mix):
    with pytest.raises(ValueError, match="no kernel"):
        mix.kernels(['"ID","Kernel Name","Metric Name"', '"0","k","Duration"'])
    with pytest.raises(ValueError, match="not an ncu source page"):
        mix.kernels(['"Kernel Name","k",', '"ID","Metric Name"', '"0","x"'])


def test_the_command_line(tmp_path):
    src = tmp_path / "source.csv"
    src.write_text(page(FIRST, SECOND))
    out = tmp_path / "mix.json"
    run = subprocess.run([sys.executable, str(SCRIPT), str(src), "--entries", "100", "--json", str(out)],
                         capture_output=True, text=True, check=True)
    assert "void combine<3>(Args): 6,000 warp instructions, 1920.0 thread instructions per entry" in run.stdout
    assert "stall reasons (share of all samples): wait 75.0 %, math 25.0 %" in run.stdout
    saved = json.loads(out.read_text())
    assert [r["kernel"] for r in saved["kernels"]] == ["void combine<3>(Args)", "void residues<0>(Args)"]
    assert saved["command"] == f"python {SCRIPT} {src} --entries 100 --json {out}" and "gpu" not in saved
    hot = subprocess.run([sys.executable, str(SCRIPT), str(src), "--lines", "1"], capture_output=True, text=True,
                         check=True)
    assert ("+0x00020  50.0 % of samples, executed 2,000: IMAD.WIDE.U32 R4, R5, 0x8, R2  (wait 75 %, math 25 %)"
            in hot.stdout)
    neg = subprocess.run([sys.executable, str(SCRIPT), str(src), "--lines", "-1"], capture_output=True, text=True)
    assert neg.returncode == 2 and "--lines must be at least 0" in neg.stderr
    bad = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "missing.csv")], capture_output=True, text=True)
    assert bad.returncode == 1 and "ncu_mix:" in bad.stderr
    zero = subprocess.run([sys.executable, str(SCRIPT), str(src), "--entries", "0"], capture_output=True, text=True)
    assert zero.returncode == 2 and "--entries must be at least 1" in zero.stderr
