import pytest

from core.host import HostCapabilities
from models import get_suite
from runner.matrix import MatrixError, MatrixRequest, build_plan

HOST = HostCapabilities(
    torch_version="2.9.0",
    dynamo_backends=("inductor", "aot_eager", "eager", "openxla"),
    packages={"torch": "2.9.0"},
)
SEED_EXAMPLE = MatrixRequest(
    accelerators=("cpu",), xla=("PJRT", None), dynamo=("openxla", "inductor", None),
    tests=("eval",),
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
    request = MatrixRequest(accelerators=("cpu",), xla=(None,), dynamo=(None,), tests=("eval",),
                            filters=("MLP", "^c"), excludes=("cnn",))
    plan = build_plan(get_suite("builtin"), request, HOST)
    assert plan.model_names == ["mlp"]


def test_invalid_regex_names_the_flag_and_value():
    request = MatrixRequest(filters=("mlp(",))
    with pytest.raises(MatrixError, match=r"--filter 'mlp\(' is not a valid regular expression"):
        build_plan(get_suite("builtin"), request, HOST)


def test_no_matching_model_is_an_error_listing_the_models():
    with pytest.raises(MatrixError, match="no model of suite 'builtin' matches.*mlp, cnn"):
        build_plan(get_suite("builtin"), MatrixRequest(filters=("resnet",)), HOST)


def test_every_combination_invalid_is_an_error_with_the_reason():
    request = MatrixRequest(accelerators=("cuda",), xla=(None,), dynamo=(None,))
    with pytest.raises(MatrixError, match="needs a CUDA device"):
        build_plan(get_suite("builtin"), request, HOST)


def test_tpu_only_with_an_xla_stack():
    request = MatrixRequest(accelerators=("tpu", "cpu"), xla=(None,), dynamo=(None, "inductor"))
    plan = build_plan(get_suite("builtin"), request, HOST)
    assert {p.experiment.accelerator for p in plan.experiments} == {"cpu"}
    reasons = [d.reason for d in plan.dropped if d.experiment.accelerator == "tpu"]
    assert reasons and all("XLA stack" in r for r in reasons)


def test_unknown_dynamo_backend_is_dropped_with_the_known_ones():
    request = MatrixRequest(accelerators=("cpu",), xla=(None,), dynamo=(None, "nonsense"),
                            tests=("eval",))
    plan = build_plan(get_suite("builtin"), request, HOST)
    (dropped,) = plan.dropped
    assert "'nonsense' is not registered" in dropped.reason and "inductor" in dropped.reason


def test_partitions_are_disjoint_and_cover_everything():
    base = dict(accelerators=("cpu",), xla=(None,), dynamo=(None, "inductor"))
    whole = build_plan(get_suite("builtin"), MatrixRequest(**base), HOST)
    parts = [
        build_plan(get_suite("builtin"),
                   MatrixRequest(**base, total_partitions=3, partition_id=i), HOST)
        for i in range(3)
    ]
    ids = [p.fingerprint for part in parts for p in part.experiments]
    assert len(ids) == len(set(ids)) == len(whole.experiments)
    with pytest.raises(MatrixError, match="--partition-id"):
        build_plan(get_suite("builtin"), MatrixRequest(**base, total_partitions=3, partition_id=3), HOST)


def test_recorded_experiments_are_skipped():
    request = MatrixRequest(accelerators=("cpu",), xla=(None,), dynamo=(None,), tests=("eval",))
    first = build_plan(get_suite("builtin"), request, HOST)
    recorded = frozenset(p.fingerprint for p in first.experiments[:2])
    second = build_plan(get_suite("builtin"), request, HOST, recorded)
    assert len(second.already_recorded) == 2
    assert len(second.experiments) == len(first.experiments) - 2


def test_torchax_modes_join_only_a_fully_unset_stack_request():
    unset = build_plan(get_suite("builtin"), MatrixRequest(accelerators=("cpu",)), HOST)
    all_modes = {p.experiment.torch_xla2 for p in unset.experiments} | {
        d.experiment.torch_xla2 for d in unset.dropped}
    assert all_modes == {None, "torch_export", "extract_jax"}
    named = build_plan(get_suite("builtin"), MatrixRequest(accelerators=("cpu",), dynamo=(None,)), HOST)
    assert {p.experiment.torch_xla2 for p in named.experiments} == {None}
