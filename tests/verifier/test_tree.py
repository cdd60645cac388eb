import collections
import dataclasses

import pytest
import torch

from verifier.tree import (
    StructureMismatch, find_path, flatten, get_leaf, render_path, replace_leaf, zip_leaves,
)

Point = collections.namedtuple("Point", ["x", "y"])


@dataclasses.dataclass
class Holder:
    a: torch.Tensor
    b: tuple


def rendered(value):
    return [render_path(p) for p, _ in flatten(value)]


def test_paths_of_nested_containers():
    t = torch.zeros(2)
    value = (t, [t, {"logits": t, 3: None}], Point(t, "s"), Holder(t, (1, True)))
    assert rendered(value) == [
        "output[0]", "output[1][0]", "output[1][1]['logits']", "output[1][1][3]",
        "output[2][0]", "output[2][1]", "output[3].a", "output[3].b[0]", "output[3].b[1]",
    ]


def test_a_top_level_mapping_renders_its_keys_bare():
    value = {"loss": torch.tensor(1.0), "gradients": {"layers.0.weight": torch.zeros(1)},
             "not an identifier": 1}
    assert rendered(value) == ["loss", "gradients['layers.0.weight']",
                               "output['not an identifier']"]
    assert rendered(torch.zeros(1)) == ["output"]


def test_model_output_is_walked_by_key_and_its_dropped_none_fields_match_none():
    modeling_outputs = pytest.importorskip("transformers.modeling_outputs")
    t = torch.ones(2, 3)
    output = modeling_outputs.BaseModelOutput(last_hidden_state=t, hidden_states=None)
    assert rendered((output,)) == ["output[0]['last_hidden_state']"]
    pairs = zip_leaves(output, {"last_hidden_state": t, "hidden_states": None})
    assert [render_path(p) for p, _, _ in pairs] == ["last_hidden_state"]
    with pytest.raises(StructureMismatch, match="extra keys \\['attentions'\\]"):
        zip_leaves(output, {"last_hidden_state": t, "attentions": t})


def test_structure_mismatches_name_the_path():
    t = torch.zeros(1)
    with pytest.raises(StructureMismatch) as info:
        zip_leaves((t, {"a": (t, t)}), (t, {"a": (t,)}))
    assert str(info.value).startswith("output[1]['a']: experiment returned tuple of 1")
    with pytest.raises(StructureMismatch, match=r"output\[1\]: .*lacks keys \['b'\]"):
        zip_leaves((t, {"a": t, "b": t}), (t, {"a": t}))
    with pytest.raises(StructureMismatch, match=r"output\[0\]: experiment returned tuple of 2 "
                                                r"where eager returned Tensor"):
        zip_leaves((t,), ((t, t),))


def test_sequences_match_by_position_whatever_their_class():
    t = torch.zeros(1)
    pairs = zip_leaves((t, [t]), [t, (t,)])
    assert [render_path(p) for p, _, _ in pairs] == ["output[0]", "output[1][0]"]


def test_deep_nesting():
    leaf = torch.arange(3)
    value = leaf
    for depth in range(60):
        value = {"k": [value]} if depth % 2 else (value,)
    (path, found), = flatten(value)
    assert found is leaf and len(path) == 90


def test_replace_leaf_rebuilds_containers_and_leaves_the_original_alone():
    t = torch.zeros(2)
    value = {"p": Point(t, [t, Holder(t, (t,))])}
    path = find_path(value, "p[1][1].b[0]")
    changed = replace_leaf(value, path, "new")
    assert get_leaf(changed, path) == "new"
    assert isinstance(changed["p"], Point) and isinstance(changed["p"].y[1], Holder)
    assert get_leaf(value, path) is t


def test_replace_leaf_keeps_model_output_class():
    modeling_outputs = pytest.importorskip("transformers.modeling_outputs")
    output = modeling_outputs.BaseModelOutput(last_hidden_state=torch.zeros(1))
    changed = replace_leaf(output, find_path(output, "['last_hidden_state']"), torch.ones(1))
    assert type(changed) is type(output)
    assert changed.last_hidden_state.item() == 1.0 and output.last_hidden_state.item() == 0.0


def test_find_path_accepts_bracketed_forms_and_lists_leaves_when_absent():
    t = torch.zeros(1)
    value = (t, t, {"logits": t})
    assert find_path(value, "[1]") == find_path(value, "output[1]")
    assert render_path(find_path(value, "[2]['logits']")) == "output[2]['logits']"
    train = {"loss": t, "gradients": {"w": t}}
    assert find_path(train, "['gradients']['w']") == find_path(train, "gradients['w']")
    with pytest.raises(ValueError, match=r"no leaf at path 'output\[5\]'.*output\[2\]\['logits'\]"):
        find_path(value, "output[5]")
