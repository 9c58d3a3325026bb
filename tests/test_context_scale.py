"""The verify cost at other contexts than the one measured (``engine.policy.context_scale``)."""

import json

import pytest

from engine.errors import EngineError
from engine.policy.context_scale import ContextScale
from engine.policy.verify_cost import CostCurve, curve_from_spec

GRID = ContextScale((128, 384, 1152), (1, 16), ((0.98, 0.83), (1.0, 1.0), (1.18, 1.37)))


def test_the_module_docstring_example():
    assert GRID(16, 768) == pytest.approx(1.185)
    assert GRID(8, 64) == pytest.approx(0.98 + 7 / 15 * (0.83 - 0.98))
    assert GRID(1, 384) == 1.0


def test_held_at_the_grid_edges_never_extrapolated():
    assert GRID(64, 10_000) == pytest.approx(1.37)
    assert GRID(1, 1) == pytest.approx(0.98)
    assert ContextScale((512,), (1,), ((1.0,),))(30, 99) == 1.0


def test_a_curve_prices_a_pass_at_its_context():
    curve = CostCurve({1: 0.01, 16: 0.03}, context_scale=GRID)
    assert curve.at_context(16, 1152) == pytest.approx(0.03 * 1.37)
    assert CostCurve({1: 0.01, 16: 0.03}).at_context(16, 1152) == 0.03


@pytest.mark.parametrize(
    "bad",
    [
        "grid",
        {"contexts": [384, 128], "lengths": [1], "ratios": [[1.0], [1.0]]},
        {"contexts": [128], "lengths": [1, 1], "ratios": [[1.0, 1.0]]},
        {"contexts": [128], "lengths": [1], "ratios": [[0.0]]},
        {"contexts": [128], "lengths": [1], "ratios": [[1.0], [1.0]]},
        {"contexts": [128], "lengths": [1], "ratios": [["1"]]},
        {"contexts": [True], "lengths": [1], "ratios": [[1.0]]},
    ],
)
def test_a_bad_scale_in_a_curve_file_is_a_clear_error(tmp_path, bad):
    path = tmp_path / "curve.json"
    path.write_text(json.dumps({"seconds": {"1": 0.01, "2": 0.02}, "context_scale": bad}))
    with pytest.raises(EngineError, match="cannot be used.*context_scale"):
        curve_from_spec(str(path))


def test_a_curve_file_states_its_scale(tmp_path):
    path = tmp_path / "curve.json"
    data = {"seconds": {"1": 0.01, "16": 0.03}, "context_scale": GRID.to_dict()}
    path.write_text(json.dumps(data))
    named = curve_from_spec(str(path))
    assert named.context_scale == GRID
    assert named.curve().at_context(16, 768) == pytest.approx(0.03 * 1.185)
