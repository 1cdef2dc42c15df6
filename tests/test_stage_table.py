"""scripts/stage_table.py: ncu's CSV read back, kernels grouped into stages and set against
the bytes each stage must move."""

import json

import pytest

from script_modules import SCRIPTS, load_script

SCRIPT = SCRIPTS / "stage_table.py"


@pytest.fixture(scope="module")
def st():
    return load_script(SCRIPT)


HEAD = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",'
        '"Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"')


def rows(kid, name, ns, read_gb, write_mb):
    pre = f'"{kid}","1","p","h","{name}","1","7","(256, 1, 1)","(2, 1, 1)","0","9.0","m",'
    return [pre + f'"gpu__time_duration.sum","nsecond","{ns:,}"'.replace("nsecond", "ns"),
            pre + f'"dram__bytes_read.sum","Gbyte","{read_gb}"',
            pre + f'"dram__bytes_write.sum","Mbyte","{write_mb}"']


def ncu_text():
    lines = ["==PROF== Connected", '{"m": 1}', HEAD]
    lines += rows(0, "stages::scan_vector_kernel(stages::VectorSet)", 1_000_000, "2.5", "0")
    lines += rows(1, "void cutlass::device_kernel<Coarse>(Params)", 500_000, "1", "0")
    lines += rows(2, "stages::residues_kernel(stages::ResidueArgs)", 2_000_000, "1", "1,500")
    lines += rows(3, "void cutlass::device_kernel<Gemm>(Params)", 9_000_000, "3", "0")
    lines += rows(4, "void stages::crt_residue_mma_kernel<4, 1>(stages::CrtArgs)", 1_000_000, "1", "500")
    return "\n".join(lines)


def test_ncu_csv_is_read_in_launch_order_with_units(st):
    ks = st.parse_ncu(ncu_text())
    assert [k["ns"] for k in ks] == [1e6, 5e5, 2e6, 9e6, 1e6]
    assert ks[2]["read"] == 1e9 and ks[2]["write"] == 1.5e9


def test_unknown_units_are_refused(st):
    with pytest.raises(ValueError, match="unit"):
        st.parse_ncu("\n".join([HEAD, *rows(0, "k", 1, "1", "1")]).replace('"Mbyte"', '"furlong"'))


def test_stages_and_their_floors(st):
    run = {"m": 1000, "n": 2000, "k": 500, "moduli": 15}
    got = {r["stage"]: r for r in st.stage_rows(run, st.parse_ncu(ncu_text()), 4.0)}
    # a GEMM before the residues is accurate mode's coarse one, after them the products
    assert list(got) == ["scan", "coarse gemm", "residues", "int8 gemm", "combine"]
    scan = got["scan"]
    assert scan["floor_gb"] == pytest.approx(8 * 3000 * 500 / 1e9)
    assert scan["gbs"] == pytest.approx(2500.0)
    assert scan["ratio"] == pytest.approx(1.0 / (scan["floor_gb"] / 4.0))
    assert got["residues"]["floor_gb"] == pytest.approx((8 + 15) * 3000 * 500 / 1e9)
    assert got["combine"]["floor_gb"] == pytest.approx((15 + 8) * 1000 * 2000 / 1e9)
    assert got["int8 gemm"]["floor_ms"] == pytest.approx(15 * 2e9 / 1.5e15 * 1e3)
    assert got["int8 gemm"]["floor_gb"] is None
    # each stage says which kernels took its time
    assert got["combine"]["by_kernel"] == [{"kernel": "stages::crt_residue_mma_kernel<4, 1>", "launches": 1,
                                            "ms": pytest.approx(1.0)}]
    for r in got.values():
        assert sum(e["ms"] for e in r["by_kernel"]) == pytest.approx(r["ms"])
        assert sum(e["launches"] for e in r["by_kernel"]) == r["kernels"]


def with_issue(text, clocks, insts):
    """The fake CSV with each kernel's SM clock (Ghz, Mhz: both units) and warp instructions."""
    lines = text.splitlines()
    for kid, (ghz, inst) in enumerate(zip(clocks, insts)):
        pre = f'"{kid}","1","p","h","k","1","7","(256, 1, 1)","(2, 1, 1)","0","9.0","m",'
        clock = f'"sm__cycles_elapsed.avg.per_second","Ghz","{ghz}"' if kid % 2 else \
            f'"sm__cycles_elapsed.avg.per_second","Mhz","{ghz * 1e3:,.1f}"'
        lines += [pre + clock, pre + f'"smsp__inst_executed.sum","inst","{inst:,}"']
    return "\n".join(lines)


def test_issue_floor_from_the_clock_and_the_instructions(st):
    clocks, insts = [1.9, 1.8, 2.0, 1.6, 1.75], [40_000_000, 1, 80_000_000, 5, 30_000_000]
    ks = st.parse_ncu(with_issue(ncu_text(), clocks, insts))
    assert ks[2]["hz"] == pytest.approx(2.0e9) and ks[2]["inst"] == 80_000_000
    assert ks[0]["hz"] == pytest.approx(1.9e9)  # Mhz
    run = {"m": 1000, "n": 2000, "k": 500, "moduli": 15, "mode": "accurate", "path": "fused", "sms": 132}
    got = {r["stage"]: r for r in st.stage_rows(run, ks, 4.0)}
    res = got["residues"]
    assert res["issue_floor_ms"] == pytest.approx(80e6 / (132 * 4 * 2.0e9) * 1e3)
    assert res["issue_busy"] == pytest.approx(res["issue_floor_ms"] / 2.0)  # the kernel ran 2 ms
    assert res["sm_ghz"] == pytest.approx(2.0)
    text = st.format_rows(run, list(got.values()))
    assert "| issue floor ms |" in text and f"| {res['issue_floor_ms']:.3f} |" in text
    # no SM count in the run (tables of older runs): the issue columns stay out
    del run["sms"]
    rows = st.stage_rows(run, ks, 4.0)
    assert all("issue_floor_ms" not in r for r in rows) and "issue" not in st.format_rows(run, rows)


def test_a_stage_of_several_kernels_weights_their_clocks_by_time(st):
    text = ncu_text().replace("stages::residues_kernel(stages::ResidueArgs)", "stages::scan_vector_kernel(x)")
    ks = st.parse_ncu(with_issue(text, [1.0, 1.8, 2.0, 1.6, 1.75], [10, 1, 20, 5, 30]))
    run = {"m": 1000, "n": 2000, "k": 500, "moduli": 15, "sms": 2}
    scan = {r["stage"]: r for r in st.stage_rows(run, ks, 4.0)}["scan"]  # 1 ms at 1 GHz, 2 ms at 2 GHz
    assert scan["sm_ghz"] == pytest.approx((1.0 * 1 + 2.0 * 2) / 3)
    assert scan["issue_floor_ms"] == pytest.approx((10 / 8e9 + 20 / 16e9) * 1e3)


def test_unknown_metrics_are_refused(st):
    with pytest.raises(ValueError, match="metric"):
        st.parse_ncu("\n".join([HEAD, *rows(0, "k", 1, "1", "1")]).replace("dram__bytes_read.sum", "lts__t_bytes.sum"))


@pytest.mark.parametrize("name", ["stages::residues_kernel<false>(stages::ResidueArgs)",
                                  "void stages::residues_ahead_kernel<false>(stages::ResidueArgs)"])
def test_either_residues_kernel_is_the_residues_stage(st, name):
    """The look-ahead residues kernel counts as the residues too, so the GEMMs after it are
    the products."""
    ks = st.parse_ncu(ncu_text().replace("stages::residues_kernel(stages::ResidueArgs)", name))
    assert st.stage_of(ks[2]["kernel"], False) == "residues"
    run = {"m": 1000, "n": 2000, "k": 500, "moduli": 15}
    assert [r["stage"] for r in st.stage_rows(run, ks, 4.0)] == ["scan", "coarse gemm", "residues", "int8 gemm",
                                                                  "combine"]


@pytest.mark.parametrize("coarse, alone", [("<0, 1>", "<0, 0>"), ("<0, 1, 128>", "<0, 0, 512>"),
                                           ("<1, 1, 0>", "<1, 0, 0>")])
def test_scan_writing_the_coarse_magnitudes_is_its_own_stage(st, coarse, alone):
    """scan_coarse's kernel (scan_along_k_kernel<kInner, 1[, team]>) moves what scan and
    coarse move together; the scan alone (kCoarse 0) stays the scan."""
    lines = [HEAD, *rows(0, f"void stages::scan_along_k_kernel{coarse}(stages::VectorSet)", 1_000_000, "2", "0"),
             *rows(1, f"void stages::scan_along_k_kernel{alone}(stages::VectorSet)", 1_000_000, "2", "0")]
    got = {r["stage"]: r for r in st.stage_rows({"m": 1000, "n": 2000, "k": 500, "moduli": 15},
                                                 st.parse_ncu("\n".join(lines)), 4.0)}
    assert list(got) == ["scan", "scan and coarse"]
    assert got["scan and coarse"]["floor_gb"] == pytest.approx(9 * 3000 * 500 / 1e9)
    assert got["scan"]["floor_gb"] == pytest.approx(8 * 3000 * 500 / 1e9)


def test_target_needs_sets_the_gemms_as_measured_and_the_rest_at_their_floor(st):
    table = {"run": {"m": 1000, "n": 1000, "k": 1000},
             "stages": [{"stage": "coarse gemm", "ms": 1.0, "floor_ms": 0.9},
                        {"stage": "scan", "ms": 3.0, "floor_ms": 1.0},
                        {"stage": "int8 gemm", "ms": 5.0, "floor_ms": 4.0},
                        {"stage": "combine", "ms": 2.0, "floor_ms": 1.0}]}
    r = st.target_needs(table, 0.2)  # 2e9 flop at 0.2 TFLOP/s: 10 ms
    assert r["gemm_ms"] == 6.0 and r["rest_ms"] == 5.0 and r["rest_floor_ms"] == 2.0
    assert r["ceiling_tflops"] == pytest.approx(2e9 / 8.0 / 1e9)
    assert r["left_ms"] == pytest.approx(4.0) and r["left_x_floor"] == pytest.approx(2.0)


def test_needs_names_a_target_without_a_table(st, tmp_path, capsys):
    path = tmp_path / "t.json"
    path.write_text('{"tables": [{"run": {"m": 2, "n": 2, "k": 2}, "stages": '
                    '[{"stage": "scan", "ms": 1.0, "floor_ms": 0.5}]}]}')
    assert st.main(["needs", str(path), "--target", "2x2x2=1e-6", "3x3x3=1"]) == 1
    out, err = capsys.readouterr()
    assert "| 2^3 |" in out and "no table for 3x3x3" in err


@pytest.mark.parametrize("spec", ["4096=62", "4096x4096x4096", "axbxc=1", "1x1x1=0", "1x0x1=5", "1x1x1=nan"])
def test_needs_refuses_a_malformed_target(st, spec, capsys):
    with pytest.raises(SystemExit) as exc:
        st.main(["needs", "unused.json", "--target", spec])
    assert exc.value.code == 2 and "want MxNxK=TFLOPS" in capsys.readouterr().err


@pytest.mark.parametrize("stage", ["pack", "inner", "scan", "coarse", "scan and coarse", "shifts", "residues",
                                   "combine", "int8 gemm", "contract"])
def test_each_floor_is_what_the_stage_reads_and_writes(st, stage):
    m, n, k, moduli, packed = 1000, 2000, 500, 15, 2000 * 500
    read, write = st.floor_split(stage, m, n, k, moduli, packed)
    assert st.floor_bytes(stage, m, n, k, moduli, packed) == read + write
    ab, entries = 8 * 3000 * 500, 3000 * 500
    want = {"pack": (8 * packed, 8 * packed), "inner": (ab, 0), "scan": (ab, 0), "coarse": (ab, entries),
            "scan and coarse": (ab, entries), "shifts": (4 * m * n, 0), "residues": (ab, 15 * entries),
            "combine": (15 * m * n, 8 * m * n)}.get(stage, (0, 0))
    assert (read, write) == want


def test_move_stages_round_to_words_and_skip_the_stages_with_nothing_to_move(st):
    run = {"m": 3, "n": 5, "k": 7, "moduli": 15, "packed": 5 * 7}
    got = {s: (r, w) for s, r, w in st.move_stages(run)}
    assert "int8 gemm" not in got and "coarse gemm" not in got and "contract" not in got
    assert got["shifts"] == (-(-4 * 15 // 16), 0)  # 60 bytes: 4 words
    assert got["combine"] == (-(-15 * 15 // 16), -(-8 * 15 // 16))
    assert got["residues"] == (-(-8 * 8 * 7 // 16), -(-15 * 8 * 7 // 16))



def test_move_keeps_only_the_stages_the_call_ran(st):
    ran = {s for s, _ in st.kernel_stages(st.parse_ncu(ncu_text()))}
    assert ran == {"scan", "coarse gemm", "residues", "int8 gemm", "combine"}
    run = {"m": 3, "n": 5, "k": 7, "moduli": 15, "packed": 5 * 7}
    # the GEMMs have no bytes to move; pack, inner, coarse, shifts... did not run
    assert [s for s, _, _ in st.move_stages(run, ran)] == ["scan", "residues", "combine"]
    assert [s for s, _, _ in st.move_stages(run)] == [s for s in st.STAGES if sum(st.floor_split(s, 3, 5, 7, 15, 35))]


@pytest.mark.parametrize("words", [1, 255, 256, 257, 4 * 256 * 1056 + 1, 10**8])
def test_move_grids_cover_every_word(st, words):
    sms = 132
    for grid in st.MOVE_GRIDS:
        blocks = st.move_blocks(words, grid, sms)
        threads = blocks * st.MOVE_THREADS
        if grid == "resident":
            assert blocks <= sms * st.MOVE_BLOCKS_PER_SM  # a grid-stride loop covers the rest
        else:
            assert threads * int(grid) >= words > (blocks - 1) * st.MOVE_THREADS * int(grid)


def test_move_source_has_a_kernel_per_stage_and_grid_named_back_to_both(st):
    src = st.move_source(["scan and coarse", "shifts"])
    for stage in ("scan and coarse", "shifts"):
        for grid in st.MOVE_GRIDS:
            name = st.move_kernel_name(stage, grid)
            assert f"void __launch_bounds__({st.MOVE_THREADS}) {name}(" in src
            assert st.move_of(name + "(const uint4 *, long long, uint4 *, long long, uint4 *)") == (stage, grid)
    assert st.move_of("void stages::residues_kernel<false>(stages::ResidueArgs)") is None


def move_csv(times):
    lines = [HEAD]
    for kid, (name, ns) in enumerate(times):
        lines += rows(kid, name + "(const uint4 *, long long, uint4 *, long long, uint4 *)", ns, "0.5", "0")
    return "\n".join(lines)


def test_table_sets_each_stage_against_its_fastest_move(st, tmp_path, capsys):
    run = {"m": 1000, "n": 2000, "k": 500, "moduli": 15, "mode": "accurate", "path": "fused", "gpu": "NVIDIA H200"}
    moves = st.fastest_moves(st.parse_ncu(move_csv([
        ("move_scan_1", 400_000), ("move_scan_4", 300_000), ("move_scan_resident", 350_000),
        ("move_combine_1", 800_000), ("move_combine_4", 900_000), ("move_combine_resident", 500_000)])))
    assert moves == {"scan": {"ms": pytest.approx(0.3), "grid": "4"},
                     "combine": {"ms": pytest.approx(0.5), "grid": "resident"}}
    got = {r["stage"]: r for r in st.stage_rows(run, st.parse_ncu(ncu_text()), 4.0, moves)}
    assert got["scan"]["x_move"] == pytest.approx(1.0 / 0.3)
    assert got["scan"]["move_x_floor"] == pytest.approx(0.3 / got["scan"]["floor_ms"])
    assert got["combine"]["x_move"] == pytest.approx(2.0) and got["combine"]["move_grid"] == "resident"
    assert "move_ms" not in got["residues"]  # no move of its bytes in this CSV
    # through the command line: RUN.json:NCU.csv:MOVE.csv
    (tmp_path / "run.json").write_text(json.dumps(run))
    (tmp_path / "ncu.csv").write_text(ncu_text())
    (tmp_path / "move.csv").write_text(move_csv([("move_combine_4", 500_000)]))
    spec = ":".join(str(tmp_path / f) for f in ("run.json", "ncu.csv", "move.csv"))
    assert st.main(["table", spec, "--bandwidth", "4.0", "--json", str(tmp_path / "t.json")]) == 0
    out = capsys.readouterr().out
    assert "| plain move ms (x floor) | x move |" in out
    combine = [ln for ln in out.splitlines() if ln.startswith("| combine |")][0]
    assert combine.endswith(f"| 0.5000 ({0.5 / got['combine']['floor_ms']:.2f}) | 2.00 |")
    assert [ln for ln in out.splitlines() if ln.startswith("| scan |")][0].endswith("| - | - |")
    assert "1000 x 2000 x 500, 15 moduli accurate, path fused, NVIDIA H200 (events, ms: " in out
    # the table's file: its own date and command, each run with the GPU it names
    saved = json.loads((tmp_path / "t.json").read_text())
    assert "gpu" not in saved and saved["command"].startswith("python ") and saved["tables"][0]["run"] == run


def test_a_move_csv_with_another_kernel_is_refused(st):
    with pytest.raises(ValueError, match="not a move kernel"):
        st.fastest_moves(st.parse_ncu(move_csv([("move_scan_1", 1), ("stages::pack_kernel", 2)])))


def test_table_refuses_a_spec_of_four_files(st, capsys):
    assert st.main(["table", "a:b:c:d"]) == 2
    assert "want RUN.json:NCU.csv or RUN.json:NCU.csv:MOVE.csv" in capsys.readouterr().err


@pytest.mark.nvcc
def test_move_source_compiles(st, tmp_path, nvcc_toolchain):
    """The move kernels as the device's NVRTC gets them, compiled here by the toolchain's nvcc."""
    import subprocess

    nvcc = nvcc_toolchain.nvcc
    src = tmp_path / "move.cu"
    src.write_text(st.move_source(st.STAGES))
    subprocess.run([str(nvcc), "-arch=sm_90a", "-cubin", "-o", str(tmp_path / "move.cubin"), str(src)], check=True)
    assert (tmp_path / "move.cubin").stat().st_size > 0
