"""Write weights.toml for the llm-inference suite from an explicit, simple serving model.

    python problem_bundles/llm-inference/make_weights.py [--hardware h200] [--prefill 0.35]

The model, stated plainly:
- GPU time splits between the serving phases as PREFILL_SHARE (prefill) and 1 - PREFILL_SHARE
  (decode); 0.35/0.65 is a chat-style workload where decode dominates.
- Within a phase, each (problem, shape) takes time in proportion to its roofline time on the
  chosen hardware (the speed-of-light estimate of one call: grader/scoring/roofline.py)
  multiplied by CALLS, how often the operator runs per forward pass of one layer.
- Smoke shapes carry no weight.
- The fleet serves every model whose shapes appear in the suite at once, so CALLS counts an
  operator once per layer of the models that use it (0.5-2 for the norms and activations,
  4 for the projections, 1/32 for once-per-forward operators such as sampling and embedding),
  without weighting one model's traffic above another's.

These weights are illustrative: organisers should replace them with weights computed from
their own fleet's traces (the share of GPU time each operator and shape takes in production).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from grader.scoring.hardware import load_hardware
from grader.scoring.roofline import roofline
from grader.suite.load import load_problem, load_suite

HERE = Path(__file__).resolve().parent
PREFILL_SHARE = 0.35
# Calls per layer and forward pass (a Llama-style block: 4 projections, 2 norms, one RoPE...).
CALLS = {"gemm_bf16": 4.0, "rms_norm": 1.0, "fused_add_rms_norm": 1.0, "silu_and_mul": 1.0,
         "rope": 1.0, "reshape_and_cache": 1.0, "moe_topk_softmax": 1.0,
         "fp8_per_token_quant": 2.0, "softmax": 1.0 / 32, "embedding": 1.0 / 32,
         "gelu_tanh_and_mul": 1.0, "fp8_block_gemm": 4.0, "fp8_per_group_quant": 2.0,
         "attention_prefill": 1.0, "paged_attention_decode": 1.0, "layer_norm": 2.0,
         "l2_norm": 1.5, "top_k_top_p_filter": 1.0 / 32, "fused_moe": 1.0, "moe_align_sort": 1.0}


def weights(hardware: str, prefill_share: float) -> list[tuple[str, str, float]]:
    profile = load_hardware(hardware)
    terms: dict[str, list[tuple[str, str, float]]] = {"prefill": [], "decode": []}
    for pid in sorted(load_suite(HERE).problems):  # the suite's problems, not every folder
        problem = load_problem(HERE / pid).problem
        for shape in problem.shapes:
            if shape.smoke:
                continue
            t = roofline(problem, shape, profile).t_s * CALLS.get(problem.id, 1.0)
            terms[shape.phase].append((problem.id, shape.id, t))
    out = []
    for phase, share in (("prefill", prefill_share), ("decode", 1.0 - prefill_share)):
        total = sum(t for _, _, t in terms[phase]) or 1.0
        out += [(p, s, share * t / total) for p, s, t in terms[phase]]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hardware", default="h200")
    ap.add_argument("--prefill", type=float, default=PREFILL_SHARE)
    args = ap.parse_args()
    rows = weights(args.hardware, args.prefill)
    lines = [
        "# Written by make_weights.py (see its docstring for the serving model). Illustrative:",
        "# replace with weights from your own fleet's traces.",
        'version = "0.2.0"',
        f'source = "make_weights.py: roofline time on {args.hardware} x calls per layer, '
        f'prefill {args.prefill:.2f} / decode {1 - args.prefill:.2f} of GPU time; '
        'not from production traces"',
    ]
    for problem, shape, w in rows:
        lines += ["", "[[weights]]", f'problem = "{problem}"', f'shape = "{shape}"',
                  f"weight = {w:.6f}"]
    (HERE / "weights.toml").write_text("\n".join(lines) + "\n")
    print(f"wrote {len(rows)} weights to {HERE / 'weights.toml'}")


if __name__ == "__main__":
    main()
