"""`serve_target` on a tiny real model: every part of the result, and the variants seam."""

from __future__ import annotations

import torch

from torchdoctor.serve import InferenceTarget, ServePlan, ServeResult, serve_target
from torchdoctor.serve.run import instances_curve


def test_a_tiny_model_is_measured_and_its_variant_compared() -> None:
    torch.manual_seed(0)
    target = InferenceTarget("linear", torch.nn.Linear(8, 4).eval(), torch.randn(1, 8), "cpu")
    with_grad = target.model  # the same model called without inference_mode: a variant

    def variant() -> object:
        return with_grad(target.inputs)

    set_to: list[int] = []
    plan = ServePlan(
        max_batch_size=4, latency_budget_s=2.0, curve_calls=5, variants={"autograd": variant}
    )
    said: list[str] = []
    result = serve_target(target, plan, progress=said.append, set_threads=set_to.append)
    assert result.latency.summary.n >= 459 and result.latency.first_call_s > 0
    assert result.curves[0].points[0].batch_size == 1
    assert [r.batch_size for r in result.service_table] == [
        p.batch_size for p in result.curves[0].points
    ]
    assert result.curves[1].axis == "threads" and set_to[-1] == torch.get_num_threads()
    assert len(result.predictions) == 4 and all(r.simulated for r in result.predictions)
    # The predictions come from the simulation calibrated on one real run, at other rates.
    assert result.calibration is not None and result.calibration.requests >= 200
    assert all(r.calibrated_at_rate == result.calibration.rate for r in result.predictions)
    assert result.calibration.rate not in {r.target_rate for r in result.predictions}
    (comparison,) = result.comparisons
    assert comparison.candidate == "autograd" and comparison.requests_per_side >= 459
    assert "comparing autograd with the eager model" in said
    assert result.sla_search is None
    assert ServeResult.from_json_dict(result.to_json_dict()) == result


def test_the_instances_curve_says_why_it_is_missing() -> None:
    plan = ServePlan(instances=True)
    model = torch.nn.Linear(8, 4).eval()
    built_here = InferenceTarget("linear", model, torch.randn(1, 8), "cpu")
    curve, why = instances_curve(built_here, plan, print)
    assert curve is None and why is not None and "file.py:factory" in why
    on_gpu = InferenceTarget("mlp", model, torch.randn(1, 8), "cuda", spec="mlp")
    curve, why = instances_curve(on_gpu, plan, print)
    assert curve is None and why is not None and "for a CPU" in why
