"""The published gpt-oss checkpoint layout, shared by the reference tools in this folder.

MXFP4 quantisation/dequantisation of the expert matrices (REFERENCE.md section 4.c), bf16 rounding of everything
else (so that an fp32 model holds exactly what is on disk), writing the two-shard safetensors layout with its
index and a config.json carrying quantization_config, and checking that transformers' own MXFP4 loader
dequantises such a checkpoint to exactly our values.

Used by make_gpt_oss_fixture.py (the random tiny fixture) and train_tiny_gpt_oss.py (the trained default model).
Needs torch, transformers 5.x and safetensors.
"""
import json
import traceback

import torch
from safetensors.torch import save_file

QUANTIZATION_CONFIG = {
    "quant_method": "mxfp4",
    "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                               "model.embed_tokens", "lm_head"],
}
FP4_VALUES = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]
EXPERT_MATRICES = ("experts.gate_up_proj", "experts.down_proj")  # in memory [E, in, out]
SHARD_FILES = {1: "model-00001-of-00002.safetensors", 2: "model-00002-of-00002.safetensors"}
SHARD1_PREFIXES = ("model.embed_tokens.", "model.layers.0.")  # the rest goes to shard 2


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


def dequantize_mxfp4(blocks, scales):
    """Inverse of the on-disk packing: blocks [E,R,G,16] u8 + scales [E,R,G] u8 -> [E,R,32G] f32 (REFERENCE 4.c)."""
    low, high = (blocks & 0x0F).long(), (blocks >> 4).long()
    nibble = torch.stack([low, high], dim=-1).reshape(*blocks.shape[:-1], 32)
    values = torch.tensor(FP4_VALUES, dtype=torch.float64)[nibble]
    values = values * torch.exp2(scales.double() - 127)[..., None]
    return values.reshape(*blocks.shape[:-2], -1).float()


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
    """Write the two shards (layer 0 + embeddings, the rest) and model.safetensors.index.json."""
    tensors = dict(expert_tensors)
    for name, p in model.named_parameters():
        if not name.endswith(EXPERT_MATRICES):
            tensors[name] = p.detach().to(torch.bfloat16).contiguous()
    shards = {1: {}, 2: {}}
    for name in sorted(tensors):  # layer 0 + embeddings in shard 1, the rest in shard 2
        shards[1 if name.startswith(SHARD1_PREFIXES) else 2][name] = tensors[name]
    weight_map = {}
    for i, shard in shards.items():
        save_file(shard, str(outdir / SHARD_FILES[i]), metadata={"format": "pt"})
        weight_map.update({name: SHARD_FILES[i] for name in shard})
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    write_json(outdir / "model.safetensors.index.json", {"metadata": {"total_size": total}, "weight_map": weight_map})
    return total


def write_config(outdir, model, defaults, quantization_config=QUANTIZATION_CONFIG):
    """config.json as transformers writes it (use_diff=False), plus dtype bf16 and the quantization_config.

    defaults supplies model_type, layer_types and rope_parameters where to_json_string leaves them out.
    """
    config = json.loads(model.config.to_json_string(use_diff=False))
    for key in ("model_type", "layer_types", "rope_parameters"):
        config.setdefault(key, defaults[key])
    config["dtype"] = "bfloat16"  # what the non-expert tensors on disk are
    config["quantization_config"] = quantization_config
    write_json(outdir / "config.json", config)
    return config


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


def check_transformers_mxfp4_load(outdir, model, dequant_path=None, metadata=None):
    """Load outdir with transformers (Mxfp4Config(dequantize=True), then config only) and compare with model.

    model holds our dequantised experts and bf16-rounded other weights on CPU. If dequant_path is given, the
    experts transformers dequantised (dequantize_override) are saved there. Failures are reported, not raised.
    """
    from transformers import AutoModelForCausalLM, Mxfp4Config

    results = {}
    if dequant_path is not None:
        dequant_path.unlink(missing_ok=True)  # never leave a stale one from an earlier run
    for label, overrides in (("dequantize_override", {"quantization_config": Mxfp4Config(dequantize=True)}),
                             ("config_only", {})):
        try:
            loaded = AutoModelForCausalLM.from_pretrained(str(outdir), dtype=torch.bfloat16, **overrides)
            results[label], experts = compare_loaded(loaded, model)
            if label == "dequantize_override" and dequant_path is not None:
                save_file(experts, str(dequant_path), metadata=metadata)
        except Exception as exc:  # reported, not fatal: the rest of the output is still useful
            results[label] = {"passed": False, "error": "".join(traceback.format_exception_only(exc)).strip()}
    return results


def write_json(path, obj):
    path.write_text(json.dumps(obj, indent=2) + "\n")


@torch.no_grad()
def greedy_without_cache(model, ids, steps):
    """`steps` greedy tokens by full no-cache forwards, and the last-position logits that chose each."""
    seq, rows = ids.clone(), []
    for _ in range(steps):
        rows.append(model(input_ids=seq[None], use_cache=False).logits[0, -1].float())
        seq = torch.cat([seq, rows[-1].argmax().view(1)])
    return seq[ids.numel():].long(), torch.stack(rows)


@torch.no_grad()
def cached_decode_max_diff(model, ids, greedy_ids, greedy_logits):
    """Sanity check: KV-cached decoding of the same tokens must reproduce the no-cache logits."""
    out = model(input_ids=ids[None], use_cache=True)
    rows = [out.logits[0, -1].float()]
    for token in greedy_ids[:-1]:
        out = model(input_ids=token.view(1, 1), past_key_values=out.past_key_values, use_cache=True)
        rows.append(out.logits[0, -1].float())
    return (torch.stack(rows) - greedy_logits).abs().max().item()
