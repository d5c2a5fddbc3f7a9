from predictors.costs.learned_models import stand_in


def _node(name, inputs, outputs):
    return {"name": name, "overload": "default", "input_shapes": inputs,
            "input_dtypes": ["float32"] * len(inputs), "input_nnz": [None] * len(inputs),
            "output_shapes": outputs, "output_dtypes": ["float32"] * len(outputs),
            "output_nnz": [None] * len(outputs)}


def test_an_unseen_in_place_copy_is_priced_as_a_clone_of_its_source():
    copy = _node("aten::copy_", [[64, 68], [64, 68]], [[64, 68]])
    got = stand_in(copy, ["aten::clone", "aten::cat"])
    assert got["name"] == "aten::clone"
    assert got["input_shapes"] == [[64, 68]] and got["output_shapes"] == [[64, 68]]
    assert copy["name"] == "aten::copy_"   # the graph's node is left alone


def test_ops_a_model_knows_or_has_no_stand_in_for_stay_themselves():
    copy = _node("aten::copy_", [[8], [8]], [[8]])
    assert stand_in(copy, ["aten::copy_", "aten::clone"]) is copy
    assert stand_in(copy, ["aten::cat"]) is copy
    other = _node("aten::flip", [[8]], [[8]])
    assert stand_in(other, ["aten::clone"]) is other
