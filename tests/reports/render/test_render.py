import csv
import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

from reports.cli import report_main
from reports.render.plots import PLOT_NAMES
from reports.render.render_csv import CSV_FIELDS
from reports.render.render_hud_csv import PERFORMANCE_FIELDS as HUD_FIELDS
from reports.render.render_markdown import render_markdown
from reports.render.tables import Table
from tests.reports.conftest import craft_line

MODELS = {"mlp": 0.01, "cnn": 0.03, "transformer_block": 0.05}


def mixed_lines():
    """Two runs, a failure, a corrupted line and a line without metrics."""
    lines = []
    for model, t in MODELS.items():
        lines.append(craft_line(model, "eager", times=[t * 1.5] * 3, run_id="r1", timestamp=1.0))
        lines.append(craft_line(model, "eager", times=[t, t * 1.1, t * 0.9], cold_start=t * 2, peak_host=2**27, run_id="r2", timestamp=2.0))
        lines.append(craft_line(model, "inductor", times=[t / 2, t / 2.2, t / 1.8], cold_start=8.0, peak_host=2**26, code="PASS", run_id="r2", timestamp=2.0))
    lines.append(craft_line("mlp", "PJRT+openxla", status="failed", code="VERIFIER_DIDNT_RUN", error="RuntimeError: no TPU", run_id="r2"))
    lines.append('{"model": {"suite_name": "builtin", "model_name": "cnn"}, "experiment": {"accel')
    lines.append(craft_line("cnn", "PJRT+openxla", run_id="r2"))
    return lines


@pytest.fixture
def report_dir(write_results, tmp_path):
    path = write_results(mixed_lines())
    out = tmp_path / "out"
    assert report_main([str(path), "--output-dir", str(out), "--quiet"]) == 0
    return out


def test_csv_has_a_row_per_model_and_configuration(report_dir):
    rows = list(csv.DictReader(io.StringIO((report_dir / "report.csv").read_text())))
    assert list(rows[0].keys()) == CSV_FIELDS
    assert len(rows) == len(MODELS) * 2 + 2
    inductor = {r["model"]: r for r in rows if r["stack"] == "inductor"}
    assert float(inductor["mlp"]["speedup"]) == pytest.approx(2.0)
    assert inductor["mlp"]["speedup_method"] == "baseline" and inductor["mlp"]["mode"] == "default"
    assert inductor["mlp"]["compression_ratio"] == ""  # host RSS on CPU: no ratio
    failed = next(r for r in rows if r["stack"] == "PJRT+openxla" and r["model"] == "mlp")
    assert failed["status"] == "failed" and failed["speedup"] == "" and "no TPU" in failed["error"]


def test_markdown_tables_have_consistent_shape(report_dir):
    text = (report_dir / "report.md").read_text()
    corrupted = next(i for i, line in enumerate(mixed_lines()) if isinstance(line, str)) + 1
    assert f"line {corrupted}:" in text  # the corrupted line is named
    blocks = re.split(r"\n## ", text)
    tables = 0
    for block in blocks[1:]:
        table = [line for line in block.splitlines() if line.startswith("|")]
        if not table:
            continue
        tables += 1
        widths = {len(re.findall(r"(?<!\\)\|", line)) for line in table}
        assert len(widths) == 1, block
        assert re.fullmatch(r"\|(---\|)+", table[1])
    assert tables == 5  # runs, configurations, trend, experiments, warnings


def test_html_is_self_contained(report_dir):
    page = (report_dir / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>")
    assert not re.findall(r'(?:src|href)\s*=', page)  # nothing loaded from anywhere
    # Only the SVG namespace (an identifier, never fetched) looks like an address.
    assert set(re.findall(r"https?://[^\s\"']*", page)) == {"http://www.w3.org/2000/svg"}
    assert "@import" not in page and "url(" not in page
    assert page.count("<script") == 2  # the data, and the script that draws it
    assert '<script type="application/json" id="dashboard-data">' in page


HOSTILE = '</script><img src=x onerror=alert(1)>|pipe*star*'


def test_html_and_markdown_escape_text_from_the_results(write_results, tmp_path):
    lines = [
        craft_line(HOSTILE, "eager", times=[1.0, 1.1, 0.9]),
        craft_line(HOSTILE, "inductor", times=[0.5, 0.5, 0.5]),
        craft_line("mlp", "inductor", status="failed", code="VERIFIER_DIDNT_RUN",
                   error="ValueError: <b>bad</b> | worse"),
    ]
    out = tmp_path / "out"
    assert report_main([str(write_results(lines)), "--output-dir", str(out), "--quiet"]) == 0
    page = (out / "report.html").read_text()
    assert "<img" not in page and "</script><" not in page and "<b>" not in page
    data = page.split('id="dashboard-data">', 1)[1].split("</script>", 1)[0]
    assert "\\u003c/script\\u003e\\u003cimg src=x" in data
    markdown = (out / "report.md").read_text()
    assert "<img" not in markdown and "<b>" not in markdown
    assert r"&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;\|pipe\*star\*" in markdown
    assert r"ValueError: &lt;b&gt;bad&lt;/b&gt; \| worse" in markdown
    for block in re.split(r"\n## ", markdown)[1:]:
        table = [line for line in block.splitlines() if line.startswith("|")]
        assert len({len(re.findall(r"(?<!\\)\|", line)) for line in table}) <= 1, block


@pytest.mark.e2e
def test_plots_are_png_files_on_request(report_dir, write_results, tmp_path):
    assert not (report_dir / "plots").exists()  # the dashboard draws its own charts
    plots = tmp_path / "plots"
    assert report_main([str(write_results(mixed_lines())), "--plots-dir", str(plots), "--quiet"]) == 0
    for name in PLOT_NAMES:
        data = (plots / f"{name}.png").read_bytes()
        assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 2000


def test_terminal_table_and_latest_run(write_results, capsys):
    path = write_results(mixed_lines())
    assert report_main([str(path)]) == 0
    out = capsys.readouterr().out
    assert "geomean speedup" in out and "2.00x (3/3)" in out
    # Pass rate over verified experiments only: inductor's three PASS lines; PJRT+openxla
    # verified nothing (a failure and a line without timings): no pass rate.
    assert "100% (3/3)" in out and "not verified" in out and "0% (0/1)" not in out
    assert report_main([str(path), "--run", "r1", "--quiet"]) == 0


@pytest.mark.e2e
def test_many_models_use_the_sorted_speedup_plot(write_results, tmp_path):
    lines = []
    for i in range(60):
        lines.append(craft_line("mlp", "eager", times=[1.0 + i / 100], batch_size=i + 1))
        lines.append(craft_line("mlp", "inductor", times=[0.5 + i / 100], batch_size=i + 1))
    path = write_results(lines)
    assert report_main([str(path), "--plots-dir", str(tmp_path / "p"), "--quiet"]) == 0
    assert (tmp_path / "p" / "speedup_per_model.png").stat().st_size > 2000


@pytest.mark.parametrize(
    "args, message",
    [
        (["{missing}"], "does not exist"),
        (["{folder}"], "holds no"),
        (["{good}", "--baseline", "inductr"], "'inductr'"),
        (["{good}", "--run", "r9"], "'r9'"),
        ([], "the following arguments are required"),
        (["{good}", "--bogus"], "--bogus"),
    ],
)
def test_bad_input_exits_2_with_a_message(write_results, tmp_path, capsys, args, message):
    good = write_results(mixed_lines())
    (tmp_path / "empty").mkdir()
    values = {"missing": tmp_path / "nope.jsonl", "folder": tmp_path / "empty", "good": good}
    assert report_main([a.format(**values) for a in args]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.e2e
def test_reports_never_import_torch():
    code = (
        "import sys; import reports.cli, reports.render.plots, reports.read.load;"
        "from reports.render.plots import render_plots;"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('torch', 'torch_xla', 'jax', 'torchax', 'numpy_not_needed')];"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[3], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_hud_csv_files_per_configuration(write_results, tmp_path):
    lines = mixed_lines()
    lines.append(craft_line("mlp", "inductor", times=[1.0], code="FAIL", test="train", run_id="r2", timestamp=3.0))
    out = tmp_path / "hud"
    assert report_main([str(write_results(lines)), "--hud-csv", str(out), "--quiet"]) == 0
    names = sorted(p.name for p in out.iterdir())
    assert names == [
        "PJRT_openxla_builtin_float32_inference_cpu_performance.csv",  # nothing verified: no accuracy file
        "inductor_no_cudagraphs_builtin_float32_inference_cpu_accuracy.csv",
        "inductor_no_cudagraphs_builtin_float32_inference_cpu_performance.csv",
        "inductor_no_cudagraphs_builtin_float32_training_cpu_accuracy.csv",
        "inductor_no_cudagraphs_builtin_float32_training_cpu_performance.csv",
    ]
    perf = list(csv.reader((out / names[2]).open()))
    assert perf[0] == HUD_FIELDS
    by_name = {row[1]: dict(zip(perf[0], row)) for row in perf[1:]}
    assert by_name["mlp"]["dev"] == "cpu" and float(by_name["mlp"]["speedup"]) == pytest.approx(2.0)
    assert float(by_name["mlp"]["abs_latency"]) == pytest.approx(5.0)  # ms
    assert by_name["mlp"]["compression_ratio"] == "" and by_name["mlp"]["dynamo_peak_mem"] == ""
    failed = list(csv.DictReader((out / names[0]).open()))
    assert {r["name"]: r["speedup"] for r in failed} == {"mlp": "0.000000", "cnn": "0.000000"}
    accuracy = list(csv.DictReader((out / names[3]).open()))
    assert [(r["name"], r["accuracy"]) for r in accuracy] == [("mlp", "fail_accuracy")]


def test_hud_csv_of_eager_only_results_says_why_nothing_was_written(write_results, tmp_path, capsys):
    lines = [craft_line("mlp", "eager", times=[1.0]), craft_line("cnn", "eager", times=[2.0])]
    out = tmp_path / "hud"
    assert report_main([str(write_results(lines)), "--hud-csv", str(out), "--quiet"]) == 0
    assert not out.exists() or not list(out.iterdir())
    assert (f"{out}: no PyTorch harness CSV written: the results hold no experiment (not "
            "skipped) of a stack other than the baseline (eager)") in capsys.readouterr().err


def test_hud_csv_names_follow_modes_and_dtypes():
    from reports.read.load import ConfigKey
    from reports.render.render_hud_csv import file_stem

    assert file_stem(ConfigKey("cuda", "inductor", "train", "amp", mode="cudagraphs"), "timm") == \
        "inductor_with_cudagraphs_timm_models_amp_training_cuda"
    assert file_stem(ConfigKey("cuda", "inductor", "eval", "bf16", mode="max-autotune"), "huggingface") == \
        "inductor_max_autotune_huggingface_bfloat16_inference_cuda"
    assert file_stem(ConfigKey("cuda", "inductor", "eval", "fp16", mode="dynamic"), "torchbench") == \
        "inductor_dynamic_torchbench_float16_inference_cuda"


# Names from results files cannot inject HTML or break tables in the Markdown report.
def test_raw_html_and_pipes_from_model_names_are_escaped():
    name = '<img src=x onerror=alert(1)>|a&b'
    page = render_markdown(f"Report of {name}", [f"models: {name}"],
                           [Table(f"Rows for {name}", ["model", "status"], [[name, "ok"]])])
    assert "<img" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "&amp;b" in page
    row = next(line for line in page.splitlines() if line.startswith("| &lt;img"))
    assert row.count("|") - row.count("\\|") == 3  # two cells, nothing split
