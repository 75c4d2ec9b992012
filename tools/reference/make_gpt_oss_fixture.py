#!/usr/bin/env python3
"""Make the tiny GPT-OSS reference fixture that day0's C++ engine is tested against.

Builds a 2-layer, 4-expert GPT-OSS with transformers (fp32, eager attention, CPU), perturbs it so that
every mechanism is exercised, quantises the expert weights to MXFP4 with our own quantiser, saves the
checkpoint in the published gpt-oss layout (two shards + index + config.json), checks that transformers'
own MXFP4 loader dequantises it to exactly our values, and records per-prompt activation taps, logits and
greedy continuations from the fp32 model, whose weights hold exactly what is on disk.

Needs torch, transformers 5.x and safetensors; no network, no GPU (everything runs on CPU). Run:

    python3 tools/reference/make_gpt_oss_fixture.py tests/data/gpt_oss_tiny

Exits non-zero if transformers' MXFP4 load is not bit-identical to our dequantised weights (or raises);
everything else is still written so the failure can be inspected.
"""
import itertools
import json
import os
import platform
import sys
import traceback
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # no internet there: fail fast instead of waiting on the hub

import torch
import transformers
from safetensors.torch import save_file
from transformers import AutoConfig, AutoModelForCausalLM

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
QUANTIZATION_CONFIG = {
    "quant_method": "mxfp4",
    "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                               "model.embed_tokens", "lm_head"],
}
FP4_VALUES = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]
EXPERT_MATRICES = ("experts.gate_up_proj", "experts.down_proj")  # in memory [E, in, out]
SHARD_FILES = {1: "model-00001-of-00002.safetensors", 2: "model-00002-of-00002.safetensors"}
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


def quantize_mxfp4(w):
    """MXFP4-quantise logical weights w [E, R=out, C=in] in groups of 32 consecutive inputs.

    Returns (blocks [E,R,C/32,16] u8, scales [E,R,C/32] u8, dequantised [E,R,C] f32). Byte b of a group holds
    element 2b in its low nibble and 2b+1 in its high nibble. Rounding: nearest E2M1 magnitude; on an exact tie
    the even code (mantissa bit 0) wins, like IEEE round-half-even; values rounding to zero get nibble 0 (+0).
    """
    e_count, rows, cols = w.shape
    x = w.double().reshape(e_count, rows, cols // 32, 32)  # float64: every step below is exact
    amax = x.abs().amax(-1)
    exp = torch.where(amax > 0, torch.ceil(torch.log2(amax / 6)), torch.full_like(amax, -127)).clamp(-127, 127)
    q = x / torch.exp2(exp)[..., None]
    mags = torch.tensor(FP4_VALUES[:8], dtype=torch.float64)
    dist = (q.abs()[..., None] - mags).abs()
    not_nearest = dist > dist.amin(-1, keepdim=True)
    code = (not_nearest.long() * 2 + (torch.arange(8) & 1)).argmin(-1)
    nibble = torch.where((q < 0) & (code > 0), code + 8, code)
    deq = torch.tensor(FP4_VALUES, dtype=torch.float64)[nibble] * torch.exp2(exp)[..., None]
    nibble = nibble.to(torch.uint8)
    blocks = nibble[..., 0::2] | (nibble[..., 1::2] << 4)
    scales = (exp + 127).to(torch.uint8)
    return blocks.contiguous(), scales.contiguous(), deq.reshape(e_count, rows, cols).float()


def quantize_experts(model):
    """Quantise expert matrices, write the exact dequantised values back; return the on-disk tensors."""
    on_disk = {}
    for name, p in model.named_parameters():
        if name.endswith(EXPERT_MATRICES):
            blocks, scales, deq = quantize_mxfp4(p.detach().transpose(1, 2))  # [E,in,out] -> [E,out,in]
            p.copy_(deq.transpose(1, 2))
            on_disk[name + "_blocks"], on_disk[name + "_scales"] = blocks, scales
    return on_disk


def round_non_experts_to_bf16(model):
    """So that the fp32 model holds exactly the bf16 values stored on disk."""
    for name, p in model.named_parameters():
        if not name.endswith(EXPERT_MATRICES):
            p.copy_(p.to(torch.bfloat16).float())


def save_checkpoint(outdir, model, expert_tensors):
    tensors = dict(expert_tensors)
    for name, p in model.named_parameters():
        if not name.endswith(EXPERT_MATRICES):
            tensors[name] = p.detach().to(torch.bfloat16).contiguous()
    shards = {1: {}, 2: {}}
    for name in sorted(tensors):  # layer 0 + embeddings in shard 1, the rest in shard 2
        shards[1 if name.startswith(("model.embed_tokens.", "model.layers.0.")) else 2][name] = tensors[name]
    weight_map = {}
    for i, shard in shards.items():
        save_file(shard, str(outdir / SHARD_FILES[i]), metadata={"format": "pt"})
        weight_map.update({name: SHARD_FILES[i] for name in shard})
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    write_json(outdir / "model.safetensors.index.json", {"metadata": {"total_size": total}, "weight_map": weight_map})


def write_config(outdir, model):
    config = json.loads(model.config.to_json_string(use_diff=False))
    for key in ("model_type", "layer_types", "rope_parameters"):
        config.setdefault(key, TINY_CONFIG[key])
    config["dtype"] = "bfloat16"  # what the non-expert tensors on disk are
    config["quantization_config"] = QUANTIZATION_CONFIG
    write_json(outdir / "config.json", config)
    return config


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


def greedy_without_cache(model, ids):
    seq, rows = ids.clone(), []
    for _ in range(GREEDY_STEPS):
        rows.append(model(input_ids=seq[None], use_cache=False).logits[0, -1].float())
        seq = torch.cat([seq, rows[-1].argmax().view(1)])
    return seq[ids.numel():].long(), torch.stack(rows)


def cached_decode_max_diff(model, ids, greedy_ids, greedy_logits):
    """Sanity check: KV-cached decoding of the same tokens must reproduce the no-cache logits."""
    out = model(input_ids=ids[None], use_cache=True)
    rows = [out.logits[0, -1].float()]
    for token in greedy_ids[:-1]:
        out = model(input_ids=token.view(1, 1), past_key_values=out.past_key_values, use_cache=True)
        rows.append(out.logits[0, -1].float())
    return (torch.stack(rows) - greedy_logits).abs().max().item()


def compare_loaded(loaded, model):
    """Compare a transformers-loaded model with ours; return (result, loaded experts as [E, in, out] bf16)."""
    params = dict(loaded.named_parameters())
    result = {"bit_identical": True, "max_abs_diff": 0.0, "loaded_layout": "[E, in, out]"}
    experts = {}
    for name, ours in model.named_parameters():
        if not name.endswith(EXPERT_MATRICES):
            continue
        got = params[name].detach()
        result["loaded_dtype"] = str(got.dtype)
        if got.shape != ours.shape and got.shape == ours.transpose(1, 2).shape:
            result["loaded_layout"] = "[E, out, in]"
            got = got.transpose(1, 2)
        got, want = got.to(torch.bfloat16).contiguous(), ours.detach().to(torch.bfloat16)
        result["max_abs_diff"] = max(result["max_abs_diff"], (got.float() - want.float()).abs().max().item())
        result["bit_identical"] &= torch.equal(got, want)
        experts[name] = got
    # Non-expert tensors come straight from bf16 on disk, so they must equal our rounded fp32 values too.
    result["non_expert_mismatches"] = [
        name for name, p in model.named_parameters() if not name.endswith(EXPERT_MATRICES)
        and (name not in params or not torch.equal(params[name].detach().float(), p.detach().float()))]
    result["passed"] = result["bit_identical"] and not result["non_expert_mismatches"]
    return result, experts


def check_transformers_mxfp4_load(outdir, refdir, model, metadata):
    from transformers import Mxfp4Config

    results = {}
    (refdir / "mxfp4_dequant.safetensors").unlink(missing_ok=True)  # never leave a stale one from an earlier run
    for label, overrides in (("dequantize_override", {"quantization_config": Mxfp4Config(dequantize=True)}),
                             ("config_only", {})):
        try:
            loaded = AutoModelForCausalLM.from_pretrained(str(outdir), dtype=torch.bfloat16, **overrides)
            results[label], experts = compare_loaded(loaded, model)
            if label == "dequantize_override":
                save_file(experts, str(refdir / "mxfp4_dequant.safetensors"), metadata=metadata)
        except Exception as exc:  # reported, not fatal: the rest of the fixture is still useful
            results[label] = {"passed": False, "error": "".join(traceback.format_exception_only(exc)).strip()}
    return results


def write_json(path, obj):
    path.write_text(json.dumps(obj, indent=2) + "\n")


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
    config = write_config(outdir, model)

    g = torch.Generator().manual_seed(PROMPT_SEED)
    prompts = [torch.randint(0, PROMPT_TOKEN_LIMIT, (n,), generator=g) for n in PROMPT_LENGTHS]
    continuations, cached_diffs, margins = [], [], []
    for p, ids in enumerate(prompts):
        tensors = capture_taps(model, ids)
        tensors["greedy_ids"], tensors["greedy_logits"] = greedy_without_cache(model, ids)
        save_file({k: v.contiguous() for k, v in tensors.items()}, str(refdir / f"prompt{p}.safetensors"),
                  metadata=metadata)
        continuations.append(tensors["greedy_ids"].tolist())
        top2 = tensors["greedy_logits"].topk(2, dim=-1).values  # a tiny margin makes greedy tests fragile
        margins.append((top2[:, 0] - top2[:, 1]).min().item())
        cached_diffs.append(cached_decode_max_diff(model, ids, tensors["greedy_ids"], tensors["greedy_logits"]))

    # Last: loading runs transformers' own code paths, which must not influence the references above.
    mxfp4 = check_transformers_mxfp4_load(outdir, refdir, model, metadata)

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
