import dataclasses
import json
import logging
import subprocess
import sys

import pytest

from core.host.machine import HostCapabilities
from models import get_suite
from models.base import Suite
from runner.plan.matrix import (MatrixError, MatrixRequest, build_plan, config_json, partition_bounds,
                           select_models, single_plan)

HOST = HostCapabilities(
    torch_version="2.9.0",
    dynamo_backends=("inductor", "aot_eager", "eager", "openxla"),
    packages={"torch": "2.9.0"},
)
SEED_EXAMPLE = MatrixRequest.of(
    accelerator=("cpu",), xla=("PJRT", None), dynamo=("openxla", "inductor", None),
    test=("eval",),
)


def combos(experiments):
    return {(e.xla, e.dynamo) for e in experiments}


def test_seed_example_gives_the_four_documented_combinations_per_model():
    plan = build_plan(get_suite("builtin"), SEED_EXAMPLE, HOST)
    planned = [p.experiment for p in plan.experiments]
    dropped = {(d.experiment.xla, d.experiment.dynamo): d.reason for d in plan.dropped}
    # The two PJRT experiments run when their backend exists and torch_xla is usable;
    # otherwise they are dropped with a reason. Either way the four are accounted for.
    pjrt = {k for k in dropped if k in {("PJRT", None), ("PJRT", "openxla")}}
    assert combos(planned) | pjrt == {
        (None, None), (None, "inductor"), ("PJRT", None), ("PJRT", "openxla")
    }
    per_model = len(plan.experiments) // len(plan.model_names)
    assert per_model == len(combos(planned)) and len(plan.model_names) == 3
    assert "xla=PJRT" in dropped[(None, "openxla")]
    assert all(e.torch_xla2 is None and e.test == "eval" for e in planned)


def test_filters_are_case_insensitive_regexes_and_excludes_win():
    request = MatrixRequest.of(accelerator=("cpu",), xla=(None,), dynamo=(None,), test=("eval",),
                            filters=("MLP", "^c"), excludes=("cnn",))
    plan = build_plan(get_suite("builtin"), request, HOST)
    assert plan.model_names == ["mlp"]


def test_invalid_regex_names_the_flag_and_value():
    request = MatrixRequest.of(filters=("mlp(",))
    with pytest.raises(MatrixError, match=r"--filter 'mlp\(' is not a valid regular expression"):
        build_plan(get_suite("builtin"), request, HOST)


@pytest.mark.parametrize("pattern, reason", [
    ("a{99999999999}", "the repetition number is too large"),  # OverflowError in re
    ("(" * 3000 + ")" * 3000, "nested too deeply")])  # RecursionError in re
def test_a_regex_python_cannot_compile_is_a_usage_error_naming_the_flag(pattern, reason):
    request = MatrixRequest.of(filters=("mlp",), excludes=(pattern,))
    with pytest.raises(MatrixError, match=rf"--exclude '.*' is not a valid regular expression: {reason}"):
        build_plan(get_suite("builtin"), request, HOST)


def test_no_matching_model_is_an_error_listing_the_models():
    with pytest.raises(MatrixError, match="no model of suite 'builtin' matches.*mlp, cnn"):
        build_plan(get_suite("builtin"), MatrixRequest.of(filters=("resnet",)), HOST)


def test_every_combination_invalid_is_an_error_with_the_reason():
    request = MatrixRequest.of(accelerator=("cuda",), xla=(None,), dynamo=(None,))
    with pytest.raises(MatrixError, match="needs a CUDA device"):
        build_plan(get_suite("builtin"), request, HOST)


def test_tpu_only_with_an_xla_stack():
    request = MatrixRequest.of(accelerator=("tpu", "cpu"), xla=(None,), dynamo=(None, "inductor"))
    plan = build_plan(get_suite("builtin"), request, HOST)
    assert {p.experiment.accelerator for p in plan.experiments} == {"cpu"}
    reasons = [d.reason for d in plan.dropped if d.experiment.accelerator == "tpu"]
    assert reasons and all("XLA stack" in r for r in reasons)


def test_unknown_dynamo_backend_is_dropped_with_the_known_ones():
    request = MatrixRequest.of(accelerator=("cpu",), xla=(None,), dynamo=(None, "nonsense"),
                            test=("eval",))
    plan = build_plan(get_suite("builtin"), request, HOST)
    (dropped,) = plan.dropped
    assert "'nonsense' is not registered" in dropped.reason and "inductor" in dropped.reason


def test_partitions_are_disjoint_and_cover_everything():
    base = dict(accelerator=("cpu",), xla=(None,), dynamo=(None, "inductor"))
    whole = build_plan(get_suite("builtin"), MatrixRequest.of(**base), HOST)
    parts = [
        build_plan(get_suite("builtin"),
                   MatrixRequest.of(**base, total_partitions=3, partition_id=i), HOST)
        for i in range(3)
    ]
    ids = [p.fingerprint for part in parts for p in part.experiments]
    assert len(ids) == len(set(ids)) == len(whole.experiments)
    with pytest.raises(MatrixError, match="--partition-id"):
        build_plan(get_suite("builtin"), MatrixRequest.of(**base, total_partitions=3, partition_id=3), HOST)


def test_recorded_experiments_are_skipped():
    request = MatrixRequest.of(accelerator=("cpu",), xla=(None,), dynamo=(None,), test=("eval",))
    first = build_plan(get_suite("builtin"), request, HOST)
    recorded = frozenset(p.fingerprint for p in first.experiments[:2])
    second = build_plan(get_suite("builtin"), request, HOST, recorded)
    assert len(second.already_recorded) == 2
    assert len(second.experiments) == len(first.experiments) - 2


def test_a_resumed_sweep_with_everything_recorded_still_asks_for_its_accelerator():
    """--devices on such a sweep was refused ("runs no CUDA experiment"): seen resuming a
    finished GPU sweep."""
    from core.config import ExperimentConfig, ModelConfig
    from runner.plan.matrix import Plan, PlannedExperiment

    on_cuda = PlannedExperiment(ModelConfig("builtin", "mlp"),
                                ExperimentConfig("cuda", None, None, None, "eval", stack="eager"),
                                "eager")
    finished = Plan(experiments=[], already_recorded=[on_cuda])
    assert finished.asks_for("cuda") and not finished.asks_for("cpu")
    assert not Plan().asks_for("cuda")


def test_torchax_modes_join_only_when_torch_xla2_asks_for_them():
    unset = build_plan(get_suite("builtin"), MatrixRequest.of(accelerator=("cpu",)), HOST)
    assert {p.experiment.torch_xla2 for p in unset.experiments} == {None}
    assert {d.experiment.torch_xla2 for d in unset.dropped} == {None}
    asked = build_plan(get_suite("builtin"), MatrixRequest.of(
        accelerator=("cpu",), torch_xla2=("extract_jax", None)), HOST)
    modes = {p.experiment.torch_xla2 for p in asked.experiments} | {
        d.experiment.torch_xla2 for d in asked.dropped}
    assert modes == {None, "extract_jax"}


def test_partitions_are_contiguous_slices_of_the_model_list_as_the_peer_cuts_them():
    base = dict(accelerator=("cpu",), xla=(None,), dynamo=(None,), test=("eval",))
    suite = get_suite("builtin")  # mlp, cnn, transformer_block
    parts = [build_plan(suite, MatrixRequest.of(**base, total_partitions=2, partition_id=i), HOST)
             for i in range(2)]
    # 3 // 2 = 1 model each, the last partition takes the remainder.
    assert [p.model_names for p in parts] == [["mlp"], ["cnn", "transformer_block"]]
    assert [p.experiment.test for p in parts[1].experiments] == ["eval", "eval"]
    assert partition_bounds(103, 4, 0) == (0, 25) and partition_bounds(103, 4, 3) == (75, 103)
    assert partition_bounds(2, 3, 0) == (0, 0) and partition_bounds(2, 3, 2) == (0, 2)
    # Partitions are cut before filters: a filter may leave a partition empty.
    empty = build_plan(suite, MatrixRequest.of(**base, filters=("mlp",), total_partitions=2,
                                            partition_id=1), HOST)
    assert empty.experiments == [] and empty.model_names == []


class TieredSuite(Suite):
    name = "tiered"

    def model_names(self):
        return ["alexnet", "BERT_pytorch", "dlrm", "llama", "resnet50"]

    def default_batch_size(self, model_name):
        return 1

    def load(self, model_name, test, batch_size):
        raise NotImplementedError

    def tiers(self):
        return get_suite("torchbench").tiers()


def test_tiers_select_and_exclude_whole_names_like_the_peer():
    suite = TieredSuite()
    assert select_models(suite, [], [], filter_tiers=[1]) == ["BERT_pytorch", "dlrm"]
    assert select_models(suite, ["^res"], [], filter_tiers=[2]) == ["alexnet", "llama", "resnet50"]
    assert select_models(suite, [], [], exclude_tiers=[1, 2]) == ["resnet50"]
    with pytest.raises(MatrixError, match="--filter-by-tier 4 is not a tier of suite 'tiered'"):
        select_models(suite, [], [], filter_tiers=[4])
    with pytest.raises(MatrixError, match="suite 'builtin' has no tiers"):
        select_models(get_suite("builtin"), [], [], exclude_tiers=[1])
    with pytest.raises(MatrixError, match="--filter-by-tier"):
        select_models(suite, [], [], filter_tiers=[3])  # none of tier 3 is here


def test_filter_by_single_graph_compiles_fullgraph_only_where_dynamo_compiles():
    request = MatrixRequest.of(accelerator=("cpu",), xla=(None, "PJRT"),
                               dynamo=(None, "inductor", "openxla"), test=("eval",),
                               fullgraph=True)
    plan = build_plan(get_suite("builtin"), request, HOST)
    full = {(p.experiment.xla, p.experiment.dynamo): p.experiment.fullgraph for p in plan.experiments}
    assert full[(None, None)] is False and full[(None, "inductor")] is True
    assert full.get(("PJRT", "openxla"), True) is True
    plain = build_plan(get_suite("builtin"), dataclasses.replace(request, values={}), HOST)
    assert {p.fingerprint for p in plan.experiments} != {p.fingerprint for p in plain.experiments}


def test_the_dry_runs_configs_plan_exactly_that_experiment_again():
    request = MatrixRequest.of(accelerator=("cpu",), xla=(None,), dynamo=(None, "inductor"),
                               test=("eval", "train"), batch_size=(4,), seed=5, fullgraph=True)
    plan = build_plan(get_suite("builtin"), request, HOST)
    for planned in plan.experiments:
        model, experiment = config_json(planned)
        assert json.loads(experiment)["keep_model_data_on_cuda"] is False
        assert json.loads(experiment)["seed"] == planned.experiment.seed == 5
        (again,) = single_plan(get_suite("builtin"), model, experiment, MatrixRequest.of(), HOST).experiments
        assert again.fingerprint == planned.fingerprint and again.label == planned.label
        assert again.experiment_id == planned.experiment_id


def test_one_experiment_takes_the_command_lines_values_where_its_config_is_silent():
    experiment = '{"accelerator": "cpu", "dynamo": "inductor", "test": "eval"}'
    request = MatrixRequest.of(seed=9, matmul_precision="highest", fullgraph=True)
    (planned,) = single_plan(get_suite("builtin"), '{"model_name": "mlp"}', experiment, request,
                             HOST).experiments
    assert (planned.experiment.seed, planned.experiment.matmul_precision,
            planned.experiment.fullgraph) == (9, "highest", True)
    named = '{"accelerator": "cpu", "dynamo": null, "test": "eval", "seed": 3, "fullgraph": true}'
    (planned,) = single_plan(get_suite("builtin"), '{"model_name": "mlp"}', named, request,
                             HOST).experiments
    # The config's own values win; a switch that does not apply to eager stays off.
    assert (planned.experiment.seed, planned.experiment.fullgraph) == (3, False)


def test_peer_configs_run_one_experiment_and_bad_ones_say_why():
    suite = get_suite("dummy")
    peer_experiment = json.dumps({
        "accelerator": "cpu", "xla": None, "xla_flags": None, "dynamo": "inductor",
        "torch_xla2": None, "test": "train", "keep_model_data_on_cuda": False,
        "enable_functionalization": False})
    (planned,) = single_plan(suite, '{"model_name": "dummy"}', peer_experiment, MatrixRequest.of(),
                             HOST).experiments
    assert (planned.model.suite_name, planned.label, planned.experiment.test) == (
        "dummy", "inductor", "train")
    cases = {
        '{"accelerator": "cpu", "test": "eval", "keep_model_data_on_cuda": true}': "XLA:CUDA",
        '{"accelerator": "cpu", "test": "eval", "warp": 9}': "unknown key",
        '{"accelerator": "cpu"}': "needs test",
        '{"accelerator": "cpu", "test": "eval", "dynamo": "openxla"}': "cannot run here",
        '[1]': "JSON object",
    }
    for text, message in cases.items():
        with pytest.raises(MatrixError, match=message):
            single_plan(suite, '{"model_name": "dummy"}', text, MatrixRequest.of(), HOST)
    with pytest.raises(MatrixError, match="not in suite 'dummy'"):
        single_plan(suite, '{"model_name": "llama"}', peer_experiment, MatrixRequest.of(), HOST)


def test_only_values_the_user_named_that_cannot_run_are_refusals():
    """Unset dimensions expand to combinations that cannot run (openxla without PJRT): those
    are no refusal; a named value no valid configuration holds is one, with the reason of
    the combination closest to the defaults (eager, eval)."""
    unset = build_plan(get_suite("builtin"), MatrixRequest.of(accelerator=("cpu",)), HOST)
    assert unset.dropped and not unset.refusals()
    named = build_plan(get_suite("builtin"), MatrixRequest.of(accelerator=("cpu", "cuda")), HOST)
    (refusal,) = named.refusals()
    assert refusal.asked == "accelerator=cuda"
    assert refusal.reason == "eager on cuda needs a CUDA device, and torch 2.9.0 sees none"
    assert refusal.combinations == len([d for d in named.dropped if d.experiment.accelerator == "cuda"])


def test_with_nothing_to_run_the_error_gives_the_reason_that_matters_first():
    request = MatrixRequest.of(accelerator=("cuda",), filters=("^mlp$",))
    with pytest.raises(MatrixError) as refused:
        build_plan(get_suite("builtin"), request, HOST)
    assert str(refused.value).startswith(
        "no requested combination can run here: eager on cuda needs a CUDA device")
    assert ";" not in str(refused.value)
    request = MatrixRequest.of(accelerator=("cpu",), dynamo=("inducter",), filters=("^mlp$",))
    with pytest.raises(MatrixError, match=r"here: dynamo backend 'inducter' is not registered in "
                                          r"torch 2.9.0; did you mean 'inductor'\? backends: "):
        build_plan(get_suite("builtin"), request, HOST)


def test_requested_holds_every_experiment_in_plan_order_resumed_or_not():
    request = MatrixRequest.of(accelerator=("cpu",), xla=(None,), dynamo=(None, "inductor"))
    first = build_plan(get_suite("builtin"), request, HOST)
    recorded = frozenset(p.fingerprint for p in first.experiments[1::2])
    second = build_plan(get_suite("builtin"), request, HOST, recorded)
    assert second.requested == first.requested == first.experiments
    assert [p.model.model_name for p in second.requested[:4]] == ["mlp"] * 4


def test_the_eager_baseline_is_the_eager_experiment_a_sweep_plans():
    from runner.plan.matrix import eager_baseline

    request = MatrixRequest.of(accelerator=("cpu",), xla=(None,), dynamo=(None, "inductor"),
                               test=("eval",), filters=("^mlp$",), fullgraph=True)
    eager, inductor = build_plan(get_suite("builtin"), request, HOST).requested
    assert inductor.experiment.fullgraph and not eager.experiment.fullgraph
    baseline = eager_baseline(inductor)
    assert baseline.fingerprint == eager.fingerprint and baseline.label == "eager"


# Flags at their edges (issue 54): a -k pattern that backtracks without end refused by name
# (defect 16), and a -k that matches nothing among several named.

#: Polynomial backtracking of degree 7 over a failing match: years on 'transformer_block'
#: with Python's re.
BACKTRACKING = r"^(.*?)*(.*?)*(.*?)*(.*?)*(.*?)*(.*?)*(.*?)*\d$"


@pytest.mark.e2e
def test_a_pattern_that_backtracks_without_end_is_refused_by_name():
    # Python's re took years on it: the planner hung until it was killed. In a process of
    # its own, so that a regression fails on its timeout rather than hanging the suite.
    code = ("from models import get_suite; from runner.plan.matrix import select_models, "
            "MatrixError\ntry:\n select_models(get_suite('builtin'), [r'%s'], [])\n"
            "except MatrixError as error:\n print(error)" % BACKTRACKING)
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("matching the pattern hung the planner")
    assert done.returncode == 0, done.stderr
    assert repr(BACKTRACKING) in done.stdout and "backtracks" in done.stdout
    assert "transformer_block" in done.stdout


def test_a_filter_that_matches_nothing_among_several_is_named(caplog):
    with caplog.at_level(logging.WARNING):
        names = select_models(get_suite("builtin"), ["^mlp$", "^mpl$"], [])
    assert names == ["mlp"]
    assert "--filter '^mpl$' matches no model of suite 'builtin'" in caplog.text
    assert "'^mlp$'" not in caplog.text
    with pytest.raises(MatrixError, match="no model of suite"):
        select_models(get_suite("builtin"), ["^mpl$"], [])


def test_patterns_keep_their_meaning():
    suite = get_suite("builtin")
    assert select_models(suite, ["MLP", "^c"], []) == ["mlp", "cnn"]
    assert select_models(suite, [], ["_block$"]) == ["mlp", "cnn"]
    with pytest.raises(MatrixError, match="not a valid regular expression"):
        select_models(suite, ["(unclosed"], [])
