"""benchmarks/fidelity/fidelity_cases.py: the GPU comparison's cases cover both whole lists."""

from __future__ import annotations

import pytest

from benchmarks.fidelity import fidelity_cases as cases

REFERENCE = cases.DEFAULT_REFERENCE
needs_lists = pytest.mark.skipif(not (REFERENCE / "timm_models_list.txt").exists(),
                                 reason=f"the harness's lists are not beside the clone ({REFERENCE})")


def listed_names(name: str, separator: str | None) -> list[str]:
    return [line.split(separator)[0].strip() for line in (REFERENCE / name).read_text().splitlines()
            if line.strip()]


@needs_lists
def test_every_offline_model_of_both_lists_in_inference_and_some_in_training(capsys):
    assert cases.main(["--training", "16"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()
            if line.strip() and not line.startswith("#")]
    inference = {(suite, model) for suite, model, _, _, _, test in rows if test == "eval"}
    hub = [name for name in listed_names("huggingface_models_list.txt", ",") if "/" in name]
    assert {model for suite, model in inference if suite == "huggingface"} == set(
        listed_names("huggingface_models_list.txt", ",")) - set(hub)
    assert {model for suite, model in inference if suite == "timm"} == {
        name.split(".")[0] for name in listed_names("timm_models_list.txt", None)}
    training = [row for row in rows if row[5] == "train"]
    assert len(training) == 16 and {row[0] for row in training} == {"huggingface", "timm"}
    for suite, model, batch, precision, mode, test in rows:
        assert mode == "default"
        assert precision == ("amp" if suite == "timm" or test == "train" else "bf16")


def test_spread_picks_evenly_and_keeps_both_ends():
    assert cases.spread(list(range(10)), 4) == [0, 3, 6, 9]
    assert cases.spread([1, 2], 5) == [1, 2]


def drawn_rows(capsys, *argv: str) -> tuple[list[str], list[list[str]]]:
    assert cases.main(list(argv)) == 0
    lines = capsys.readouterr().out.splitlines()
    return ([line for line in lines if line.startswith("#")],
            [line.split() for line in lines if line.strip() and not line.startswith("#")])


@needs_lists
def test_a_draw_is_the_same_for_its_seed_and_names_it(capsys):
    header, first = drawn_rows(capsys, "--sample", "40", "--seed", "11")
    _, again = drawn_rows(capsys, "--sample", "40", "--seed", "11")
    _, other = drawn_rows(capsys, "--sample", "40", "--seed", "12")
    assert first == again and first != other
    assert header[0].startswith("# seed 11: 40 cases drawn")


@needs_lists
def test_drawn_cases_span_every_dimension_and_a_third_train(capsys):
    listed = {(model.our_name, model.batch_size)
              for model in cases.listed_models(REFERENCE)}
    batches = dict(listed)
    for seed in (1, 2, 3):
        _, rows = drawn_rows(capsys, "--sample", "45", "--seed", str(seed))
        assert len(rows) == 45
        assert len({tuple(row[:5]) for row in rows}) == 45  # distinct cases
        assert sum(row[5] == "train" for row in rows) >= 15
        assert {row[0] for row in rows} == {"huggingface", "timm"}
        assert {row[3] for row in rows} == set(cases.PRECISIONS)
        assert {row[4] for row in rows} == set(cases.MODES)
        kinds = set()
        for suite, model, batch, *_ in rows:
            own, batch = batches[model], int(batch)
            assert batch in (own, 1) or (batch < own and batch & (batch - 1) == 0)
            kinds.add("own" if batch == own else "one" if batch == 1 else "smaller")
        assert kinds == {"own", "one", "smaller"}


def test_the_sampler_keeps_at_least_a_third_training_whatever_it_draws():
    models = [("timm", f"m{index}", 64) for index in range(30)]
    for seed in range(20):
        drawn = cases.sample(models, 12, seed)
        assert sum(case[5] == "train" for case in drawn) >= 4
    with pytest.raises(ValueError):
        cases.sample(models[:1], 10**6, 0)


def test_bad_sample_options_exit_non_zero(capsys):
    assert cases.main(["--sample", "5"]) == 2
    assert "--seed" in capsys.readouterr().err


def test_batch_sizes_are_the_lists_own_smaller_powers_of_two_and_one():
    assert cases.batch_sizes(128) == [1, 2, 4, 8, 16, 32, 64, 128]
    assert cases.batch_sizes(8) == [1, 2, 4, 8]
    assert cases.batch_sizes(1) == [1]
    assert cases.batch_sizes(3) == [1, 2, 3]


@pytest.mark.parametrize("precision, flag", [("fp32", "--float32"), ("fp16", "--float16"),
                                             ("bf16", "--bfloat16"), ("amp", "--amp")])
def test_each_precision_maps_to_the_harness_flag_and_ours(precision, flag):
    theirs = cases.tool_flags("harness", precision, "default", "train", "4")
    assert theirs == [flag, "--training", "--batch-size", "4", "--disable-cudagraphs"]
    assert cases.tool_flags("ours", precision, "default", "train", "4") == [
        f"--precision={precision}", "--mode=default", "--test=train", "--batch-size=4"]


def test_the_harness_records_cuda_graphs_only_in_the_cudagraphs_mode(capsys):
    assert "--disable-cudagraphs" not in cases.tool_flags("harness", "amp", "cudagraphs",
                                                          "eval", "1")
    assert cases.main(["--flags", "harness", "bf16", "cudagraphs", "eval", "8"]) == 0
    assert capsys.readouterr().out.split() == ["--bfloat16", "--inference", "--batch-size", "8"]
    assert cases.main(["--flags", "harness", "fp8", "default", "eval", "8"]) == 2
    assert "'fp8'" in capsys.readouterr().err
    with pytest.raises(ValueError):
        cases.tool_flags("ours", "amp", "default", "eval", "0")


@needs_lists
def test_excluded_models_are_never_drawn_and_are_named(capsys):
    header, rows = drawn_rows(capsys, "--sample", "60", "--seed", "5", "--exclude", "T5Small",
                              "--exclude", "GoogleFnet")
    assert not {"T5Small", "GoogleFnet"} & {row[1] for row in rows}
    assert "--exclude GoogleFnet --exclude T5Small" in header[0]
    assert any(line == "# left out (--exclude): GoogleFnet, T5Small" for line in header)
    assert cases.main(["--sample", "5", "--seed", "1", "--exclude", "NoSuchModel"]) == 2
    assert "NoSuchModel" in capsys.readouterr().err


@needs_lists
def test_a_sweep_draw_runs_n_models_of_each_list_in_both_tests_at_the_lists_batch(capsys):
    header, rows = drawn_rows(capsys, "--sweep", "4", "--seed", "3", "--exclude", "GoogleFnet")
    _, again = drawn_rows(capsys, "--sweep", "4", "--seed", "3", "--exclude", "GoogleFnet")
    _, other = drawn_rows(capsys, "--sweep", "4", "--seed", "4", "--exclude", "GoogleFnet")
    assert rows == again and rows != other
    assert header[0].startswith("# seed 3: the sweep of 4 models") and "--exclude GoogleFnet" in header[0]
    listed = {(suite, model): batch for suite, model, batch in cases.listed(REFERENCE)}
    for suite in ("huggingface", "timm"):
        models = {row[1] for row in rows if row[0] == suite}
        assert len(models) == 4 and "GoogleFnet" not in models
        for model in models:
            mine = sorted((row[5], row[3], row[4], int(row[2])) for row in rows if row[1] == model)
            batch = listed[(suite, model)]
            assert mine == [("eval", "amp", "default", batch), ("train", "amp", "default", batch)]
    assert cases.main(["--sweep", "4"]) == 2 and "--seed" in capsys.readouterr().err
