"""Generative serving on `gpt`: KV-cache decode against recomputing the prefix, and time to
first token against prompt length.

For each prompt length and batch, requests with and without the KV cache run interleaved
(`serve.profile_generation`), and the benchmark prints, as ratios:

- time per output token, recomputing the prefix / with the cache (the cache should win: a
  decode step then runs one position instead of the whole sequence), paired by round;
- time to first token at each prompt length / at the shortest (prefill grows with the prompt).

    python benchmarks/bench_serve_generate.py            # block 256, 4 prompt lengths x 2 batches
    python benchmarks/bench_serve_generate.py --quick    # a smoke of seconds, not a result
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass

import torch

from torchdoctor.measure import compare_samples
from torchdoctor.serve.generate import GenerationProfile, profile_generation
from torchdoctor.workloads import TinyGPT, get_workload


@dataclass(frozen=True)
class Plan:
    block: int
    prompts: list[int]
    batches: list[int]
    new: int
    requests: int


#: The full run: a gpt with a 256-token context (the built-in's layers, heads and width).
FULL = Plan(block=256, prompts=[16, 64, 128, 192], batches=[1, 8], new=32, requests=20)
#: `--quick`: a smoke that runs every step on a tiny context, not a result.
QUICK = Plan(block=32, prompts=[4, 16], batches=[1, 2], new=4, requests=3)


def _tpots(profile: GenerationProfile, prompt: int, batch: int, cache: bool) -> list[float]:
    return [r.tpot_s for r in profile.point(prompt, batch, cache).requests if r.tpot_s is not None]


def _ttfts(profile: GenerationProfile, prompt: int, batch: int) -> list[float]:
    return [r.ttft_s for r in profile.point(prompt, batch, True).requests]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke of seconds, not a result")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    plan = QUICK if args.quick else FULL
    workload = get_workload("gpt", block=plan.block)
    torch.manual_seed(0)
    model = workload.build_model().to(args.device).eval()
    assert isinstance(model, TinyGPT)  # gpt's model, with its KV cache
    print(
        f"nproc={os.cpu_count()} torch={torch.__version__} device={args.device} "
        f"threads={torch.get_num_threads()} gpt block={plan.block} "
        f"new tokens={plan.new} requests={plan.requests} per point and mode"
    )
    profile = profile_generation(
        model,
        prompt_lengths=plan.prompts,
        batches=plan.batches,
        new_tokens=plan.new,
        requests=plan.requests,
        device=args.device,
        cache_modes=(True, False),
        label=f"gpt block={plan.block}",
    )
    shortest = min(plan.prompts)
    cache_wins, ttft_grows = [], []
    for batch in plan.batches:
        for prompt in plan.prompts:
            decode = compare_samples(
                _tpots(profile, prompt, batch, False),
                _tpots(profile, prompt, batch, True),
                paired=True,
            )
            prefill = compare_samples(
                _ttfts(profile, prompt, batch), _ttfts(profile, shortest, batch)
            )
            cache_wins.append(decode.verdict == "faster")
            if prompt != shortest:
                # speedup of the shortest prompt over this one = TTFT(this) / TTFT(shortest).
                ttft_grows.append(prefill.verdict == "faster")
            print(
                f"batch {batch:2d} prompt {prompt:4d}: "
                f"TTFT {profile.point(prompt, batch, True).ttft_median_s * 1e3:8.3f} ms "
                f"(x{prefill.speedup:5.2f} the shortest prompt's, "
                f"[{prefill.ci_low:.2f}, {prefill.ci_high:.2f}]); "
                f"TPOT cached {decode.candidate_median * 1e3:7.3f} ms, "
                f"recomputed {decode.baseline_median * 1e3:7.3f} ms: "
                f"recompute/cache x{decode.speedup:5.2f} "
                f"[{decode.ci_low:.2f}, {decode.ci_high:.2f}] {decode.verdict}"
            )
    print(
        f"KV-cache decode faster per token: {sum(cache_wins)}/{len(cache_wins)} points; "
        f"TTFT longer than at the shortest prompt: {sum(ttft_grows)}/{len(ttft_grows)} points"
    )


if __name__ == "__main__":
    main()
