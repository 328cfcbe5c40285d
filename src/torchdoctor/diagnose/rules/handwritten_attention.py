"""handwritten_attention: attention written as matmul, softmax, matmul instead of SDPA."""

from __future__ import annotations

from typing import Final

from torchdoctor.core.gpu import older_than_ampere
from torchdoctor.diagnose.evidence import Evidence
from torchdoctor.diagnose.findings import EvidenceValue, Finding, Prescription, make_finding
from torchdoctor.knobs import ATTENTION

RULE_ID: Final = "handwritten_attention"
TITLE: Final = "Attention written by hand"

#: Assumed speedup of the attention itself under `scaled_dot_product_attention`: the low end
#: of the 2-4x FlashAttention reports over standard PyTorch attention (Dao et al., 2022,
#: "FlashAttention: Fast and Memory-Efficient Exact Attention with IO-Awareness", sec. 4),
#: which comes from never writing the (T, S) score matrix to memory. An upper bound's
#: assumption only: the prescription is handed back, not measured.
SDPA_LOCAL_SPEEDUP: Final = 2.0
#: The rule reports hand-written attention wherever it finds one block per step; its
#: severity follows from the share of step time the blocks take.
MIN_BLOCKS_PER_STEP: Final = 1.0
CONFIDENCE: Final = 0.8

SNIPPET: Final = """\
# before: att = (q @ k.transpose(-2, -1)) * scale; att = att.masked_fill(~causal, -inf)
#         att = att.softmax(dim=-1); y = att @ v
y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
# (a padding mask instead: attn_mask=mask; dropout: dropout_p=p if self.training else 0.0)
"""


def _backend(ev: Evidence) -> str:
    """Which fused kernel SDPA picks on the job's device (it chooses by itself)."""
    if not ev.is_gpu:
        return "its fused CPU kernel"
    if older_than_ampere(ev.device, ev.cuda_capability) is not None:
        return "the memory-efficient kernel (no flash kernel before sm_80)"
    return "the flash kernel"


def check(ev: Evidence) -> Finding | None:
    tr = ev.trace
    if tr is None or tr.handwritten_attention_per_step is None:
        return None
    per_step = tr.handwritten_attention_per_step
    if per_step < MIN_BLOCKS_PER_STEP:
        return None
    share = tr.handwritten_attention_share or 0.0
    evidence: dict[str, EvidenceValue] = {"attention_blocks_per_step": round(per_step, 2)}
    if tr.handwritten_attention_share is not None:
        evidence["attention_step_share"] = round(share, 4)
    return make_finding(
        rule_id=RULE_ID,
        title=TITLE,
        summary=(
            f"{per_step:.0f} attention blocks per step are computed as matmul, softmax, "
            "matmul, writing the full score matrix out"
            + (f" ({share:.0%} of the step)." if tr.handwritten_attention_share else ".")
        ),
        bottleneck="memory_bandwidth",
        share=share,
        local_speedup=SDPA_LOCAL_SPEEDUP,
        evidence=evidence,
        prescription=Prescription(
            # A workload may expose its attention as a parameter the tuner switches and
            # measures (the `attention` knob, where the workload has it "manual"); a script's
            # or a trace's attention is code, handed back as the snippet.
            knobs={ATTENTION.name: "sdpa"} if ev.source == "workload" else {},
            code_change=(
                "replace the matmul-softmax-matmul with "
                "torch.nn.functional.scaled_dot_product_attention, which runs "
                f"{_backend(ev)} here"
            ),
            snippet=SNIPPET,
        ),
        confidence=CONFIDENCE,
    )
