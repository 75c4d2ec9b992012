#!/usr/bin/env python3
"""Make the tiny GPT-OSS reference fixture that day0's C++ engine is tested against.

Builds a 2-layer, 4-expert GPT-OSS with transformers (fp32, eager attention, CPU), perturbs it so that
every mechanism is exercised, quantises the expert weights to MXFP4 with our own quantiser, saves the
checkpoint in the published gpt-oss layout (two shards + index + config.json), checks that transformers'
own MXFP4 loader dequantises it to exactly our values, and records per-prompt activation taps, logits and
greedy continuations from the fp32 model, whose weights hold exactly what is on disk.

The checkpoint layout, the MXFP4 quantiser and the transformers load check live in gpt_oss_layout.py beside
this file (shared with train_tiny_gpt_oss.py). Needs torch, transformers 5.x and safetensors; no network, no GPU
(everything runs on CPU). Run:

    python3 tools/reference/make_gpt_oss_fixture.py tests/data/gpt_oss_tiny

Exits non-zero if transformers' MXFP4 load is not bit-identical to our dequantised weights (or raises);
everything else is still written so the failure can be inspected.
"""
import itertools
import json
import os
import platform
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # no internet there: fail fast instead of waiting on the hub

import torch
import transformers
from safetensors.torch import save_file
from transformers import AutoConfig

from gpt_oss_layout import (cached_decode_max_diff, check_transformers_mxfp4_load, greedy_without_cache,
                            quantize_experts, round_non_experts_to_bf16, save_checkpoint, write_config, write_json)

INIT_SEED = 0      # torch.manual_seed before building the model
PERTURB_SEED = 1   # generator for the post-init perturbation
PROMPT_SEED = 2    # generator for the prompt token ids
SEEDS = {"init": INIT_SEED, "perturb": PERTURB_SEED, "prompts": PROMPT_SEED}
PROMPT_LENGTHS = (20, 27, 33)  # all longer than the sliding window (8)
PROMPT_TOKEN_LIMIT = 250
GREEDY_STEPS = 32

TINY_CONFIG = {
    "model_type": "gpt_oss", "architectures": ["GptOssForCausalLM"], "vocab_size": 256, "hidden_size": 64,
    "intermediate_size": 96, "num_hidden_layers": 2, "num_local_experts": 4, "num_experts_per_tok": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "attention_bias": True,
    "sliding_window": 8, "layer_types": ["sliding_attention", "full_attention"],
    "rope_parameters": {"rope_type": "yarn", "rope_theta": 150000.0, "factor": 4.0, "beta_fast": 32.0,
                        "beta_slow": 1.0, "truncate": False, "original_max_position_embeddings": 64},
    "max_position_embeddings": 256, "rms_norm_eps": 1e-05, "tie_word_embeddings": False,
}
HOW_MADE = (
    "A GptOssForCausalLM was built from the tiny config with transformers (fp32, eager attention, CPU) after "
    "torch.manual_seed(0). With a generator seeded 1, every floating parameter/buffer (except inv_freq) that was "
    "constant at init got N(0, 0.05^2) noise, and experts.gate_up_proj was scaled by 100 so the +-7 SwiGLU clamp "
    "is active. Expert matrices were quantised to MXFP4 (groups of 32 along the input dim, E8M0 scale "
    "2^ceil(log2(amax/6)), nearest E2M1 value with ties to even mantissa, zero always +0) and the exact "
    "dequantised values written back; every other parameter was rounded to bf16 in place. The checkpoint holds "
    "these exact values (bf16 + MXFP4 blocks/scales), so the fp32 model that produced the taps, logits and greedy "
    "continuations (full no-cache forwards, argmax) is the checkpoint evaluated in fp32."
)


def build_model():
    rest = {k: v for k, v in TINY_CONFIG.items() if k != "model_type"}
    cfg = AutoConfig.for_model(TINY_CONFIG["model_type"], **rest)
    torch.manual_seed(INIT_SEED)
    model = transformers.GptOssForCausalLM._from_config(cfg, attn_implementation="eager", dtype=torch.float32)
    if hasattr(model, "set_experts_implementation"):  # 5.x: plain per-expert loop rather than grouped_mm kernels
        model.set_experts_implementation("eager")
    return model.eval()


def perturb(model):
    """Give zero/one-initialised tensors noise so their mechanism shows, and make the SwiGLU clamp bite."""
    g = torch.Generator().manual_seed(PERTURB_SEED)
    for name, p in itertools.chain(model.named_parameters(), model.named_buffers()):
        if not p.is_floating_point() or p.numel() == 0 or "inv_freq" in name:
            continue
        if p.numel() == 1 or p.float().std() == 0:
            p.add_(torch.randn(p.shape, generator=g) * 0.05)
        if name.endswith("experts.gate_up_proj"):
            p.mul_(100)


def snapshot(out):
    """Copy a hook output so that later in-place ops cannot change what was captured."""
    if isinstance(out, (tuple, list)):
        return tuple(snapshot(o) for o in out)
    return out.detach().clone() if isinstance(out, torch.Tensor) else out


def router_choice(out):
    """Top-k (indices, weights) in torch.topk order from whatever the router returns.

    5.x: (logits [T,E], weights [T,k], indices [T,k]); 4.x: (dense scores [T,E], indices [T,k]).
    """
    outs = out if isinstance(out, tuple) else (out,)
    indices = next(t for t in outs if isinstance(t, torch.Tensor) and not t.is_floating_point())
    floats = [t for t in outs if isinstance(t, torch.Tensor) and t.is_floating_point()]
    weights = next((t for t in floats if t.shape == indices.shape), None)
    if weights is None:
        weights = floats[0].gather(-1, indices)
    return indices, weights


def capture_taps(model, ids):
    seq = ids.numel()
    base, raw = model.model, {}
    modules = {"embed": base.embed_tokens}
    for i, layer in enumerate(base.layers):
        modules.update({f"layers.{i}.attn": layer.self_attn, f"layers.{i}.router": layer.mlp.router,
                        f"layers.{i}.moe": layer.mlp, f"layers.{i}.out": layer})
    modules["final_norm"] = base.norm
    handles = [m.register_forward_hook(lambda _m, _a, out, n=n: raw.__setitem__(n, snapshot(out)))
               for n, m in modules.items()]
    try:
        logits = model(input_ids=ids[None], use_cache=False).logits
    finally:
        for h in handles:
            h.remove()
    taps = {"input_ids": ids.long()}
    for name, out in raw.items():
        if name.endswith(".router"):
            indices, weights = router_choice(out)
            prefix = name[: -len("router")]
            taps[prefix + "router_indices"] = indices.reshape(seq, -1).long()
            taps[prefix + "router_weights"] = weights.reshape(seq, -1).float()
            assert torch.allclose(taps[prefix + "router_weights"].sum(-1), torch.ones(seq), atol=1e-5), \
                f"{name}: captured router weights do not sum to 1; router output misread"
        else:  # attention and MLP (and 4.x decoder layers) return tuples whose first element is the output
            t = out[0] if isinstance(out, tuple) else out
            taps[name] = t.reshape(seq, t.shape[-1]).float()
    taps["logits"] = logits.reshape(seq, -1).float()
    return taps


@torch.no_grad()
def main():
    outdir = Path(sys.argv[1] if len(sys.argv) > 1 else "tests/data/gpt_oss_tiny")
    refdir = outdir / "reference"
    refdir.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)  # fixed reduction order, so a rerun reproduces the fixture bit for bit
    # One metadata key: safetensors writes several in hash order, which would make reruns differ byte-wise.
    metadata = {"fixture": json.dumps({"transformers": transformers.__version__, "torch": torch.__version__,
                                       "seeds": SEEDS})}

    model = build_model()
    perturb(model)
    expert_tensors = quantize_experts(model)
    round_non_experts_to_bf16(model)
    save_checkpoint(outdir, model, expert_tensors)
    config = write_config(outdir, model, TINY_CONFIG)

    g = torch.Generator().manual_seed(PROMPT_SEED)
    prompts = [torch.randint(0, PROMPT_TOKEN_LIMIT, (n,), generator=g) for n in PROMPT_LENGTHS]
    continuations, cached_diffs, margins = [], [], []
    for p, ids in enumerate(prompts):
        tensors = capture_taps(model, ids)
        tensors["greedy_ids"], tensors["greedy_logits"] = greedy_without_cache(model, ids, GREEDY_STEPS)
        save_file({k: v.contiguous() for k, v in tensors.items()}, str(refdir / f"prompt{p}.safetensors"),
                  metadata=metadata)
        continuations.append(tensors["greedy_ids"].tolist())
        top2 = tensors["greedy_logits"].topk(2, dim=-1).values  # a tiny margin makes greedy tests fragile
        margins.append((top2[:, 0] - top2[:, 1]).min().item())
        cached_diffs.append(cached_decode_max_diff(model, ids, tensors["greedy_ids"], tensors["greedy_logits"]))

    # Last: loading runs transformers' own code paths, which must not influence the references above.
    mxfp4 = check_transformers_mxfp4_load(outdir, model, refdir / "mxfp4_dequant.safetensors", metadata)

    fixture_bytes = sum(f.stat().st_size for f in outdir.rglob("*") if f.is_file() and f.name != "report.json")
    write_json(refdir / "report.json", {
        "versions": {"transformers": transformers.__version__, "torch": torch.__version__,
                     "python": platform.python_version()},
        "seeds": SEEDS,
        "config": config,
        "prompts": [ids.tolist() for ids in prompts],
        "greedy_continuations": continuations,
        "greedy_min_top1_top2_logit_margin": margins,
        "mxfp4_check": mxfp4,
        "cached_vs_full_max_abs_logit_diff": cached_diffs,
        "fixture_bytes_excluding_report": fixture_bytes,
        "how_made": HOW_MADE,
    })

    print(f"wrote {outdir}: {fixture_bytes} bytes + report.json")
    for p, (ids, cont) in enumerate(zip(prompts, continuations)):
        print(f"  prompt{p}: {ids.numel()} tokens, greedy {cont[:8]}..., cached-vs-full {cached_diffs[p]:.2e}, "
              f"min argmax margin {margins[p]:.2e}")
    for label, res in mxfp4.items():
        print(f"  mxfp4 load ({label}): " + ", ".join(f"{k}={v}" for k, v in res.items()))
    if not mxfp4["dequantize_override"]["passed"]:
        sys.exit("MXFP4 check failed: transformers' dequantised experts differ from ours (see report.json)")


if __name__ == "__main__":
    main()
