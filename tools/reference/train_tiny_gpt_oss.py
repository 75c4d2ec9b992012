#!/usr/bin/env python3
"""Train pycoder-tiny: a small gpt-oss (GptOssForCausalLM, MXFP4 experts) on Python source, day0's bundled default.

Everything comes from what is installed on the machine it runs on, nothing is downloaded:
  1. corpus: the .py files of Python's standard library (sysconfig's stdlib folder, site-/dist-packages left out)
     plus those of a few installed packages, walked in sorted order; a file is held out for evaluation when
     sha1(its corpus name) mod 20 == 0;
  2. tokenizer: byte-level BPE trained with `tokenizers` on the training files only (GPT-2 regex via
     ByteLevel(add_prefix_space=False, use_regex=True), ByteLevel decoder, no normalizer, 4096 tokens including
     <|endoftext|> and <|pad|>); documents are joined as <|endoftext|> doc <|endoftext|> doc ...;
  3. model: a 4-layer gpt-oss (hidden 128, 8 experts of intermediate 192, top-2, sinks, sliding window 64 on even
     layers, YaRN) trained from torch.manual_seed(0) with AdamW on random 256-token windows (fixed data seed),
     fp32 weights with TF32 matmuls, eager attention, CE + router load-balancing loss, on the GPU for a fixed
     step count chosen from a time budget (the count is recorded; pass --steps N to repeat it);
  4. export: experts quantised to MXFP4 with our quantiser (gpt_oss_layout.py), everything else rounded to bf16,
     saved in the published layout; an fp32 model holding exactly those values gives the references (CPU, one
     thread, eager, full no-cache forwards), and transformers' own MXFP4 load is checked to be bit-identical.

Writes, under --out-root (default .):
  models/pycoder-tiny/{config.json, model-0000{1,2}-of-00002.safetensors, model.safetensors.index.json,
                       tokenizer.json, tokenizer_config.json, MODEL_CARD.md}
  tests/data/pycoder_tiny_reference/{heldout.safetensors, greedy.json, report.json}

Run on a machine with a GPU (it also runs, slowly, on CPU):
    python3 tools/reference/train_tiny_gpt_oss.py --out-root /tmp/pycoder
--smoke runs every stage on a few files and steps (to try the script quickly). --save-state/--init-state write
and read the trained fp32 weights (+ training record), so the export can be redone without training again.
"""
import argparse
import copy
import hashlib
import importlib.util
import json
import math
import os
import platform
import sys
import sysconfig
import time
import traceback
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # no internet there: fail fast instead of waiting on the hub
os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")

import safetensors
import tokenizers
import torch
import torch.nn.functional as F
import transformers
from safetensors.torch import save_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoConfig

from gpt_oss_layout import (EXPERT_MATRICES, cached_decode_max_diff, check_transformers_mxfp4_load,
                            dequantize_mxfp4, greedy_without_cache, quantize_experts, round_non_experts_to_bf16,
                            save_checkpoint, write_config, write_json)

MODEL_NAME = "pycoder-tiny"
INIT_SEED = 0   # torch.manual_seed before building the model
DATA_SEED = 1   # CPU generator for the training windows' start offsets
SEEDS = {"init": INIT_SEED, "data": DATA_SEED}
HELDOUT_MOD = 20  # a file is held out when int(sha1(name), 16) % 20 == 0
MAX_FILE_BYTES = 1_000_000
EXTRA_PACKAGES = ("requests", "urllib3", "idna", "click", "jinja2", "markupsafe", "packaging", "pyparsing",
                  "networkx", "rich", "yaml", "dateutil", "numpy", "scipy", "pandas", "sklearn", "matplotlib",
                  "sympy")
MAX_CORPUS_BYTES = 150_000_000  # sources after the one that crosses this are left out (recorded)
SKIP_DIRS = {"site-packages", "dist-packages", "__pycache__"}

VOCAB_SIZE = 4096
SPECIAL_TOKENS = ["<|endoftext|>", "<|pad|>"]  # ids 0 and 1
EOT, PAD = 0, 1

SEQ = 256
BATCH = 256
LR, MIN_LR_FRACTION, WARMUP = 3e-3, 0.1, 100
BETAS, WEIGHT_DECAY, GRAD_CLIP = (0.9, 0.95), 0.1, 1.0
AUX_LOSS_COEF = 0.01
CALIB_FROM, CALIB_TO = 10, 40  # steps timed to pick the step count (inside the warmup, so the LR is unaffected)
MAX_STEPS = 20000
TRAIN_EVAL_WINDOWS = 512
FIXTURE_WINDOWS = 8
GREEDY_STEPS = 48
# Prompts end in a word or punctuation, never in whitespace: the GPT-2 regex gives the last space of an indentation
# run to the next word ("\n   " + " return"), so a prompt ending in "\n" or "\n    " is cut into tokens that never
# occur at that place inside a training file.
PROMPTS = [
    "def fibonacci(n):\n    if",
    "import os\n\n\ndef",
    "class Stack:\n    def __init__(self):\n        self",
    'def read_lines(path):\n    """',
    "total = 0\nfor i in range(10):\n    total",
]

MODEL_CONFIG = {
    "model_type": "gpt_oss", "architectures": ["GptOssForCausalLM"], "vocab_size": VOCAB_SIZE, "hidden_size": 128,
    "intermediate_size": 192, "num_hidden_layers": 4, "num_local_experts": 8, "num_experts_per_tok": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "attention_bias": True,
    "sliding_window": 64, "layer_types": ["sliding_attention", "full_attention"] * 2,
    "rope_parameters": {"rope_type": "yarn", "rope_theta": 150000.0, "factor": 4.0, "beta_fast": 32.0,
                        "beta_slow": 1.0, "truncate": False, "original_max_position_embeddings": 256},
    "max_position_embeddings": 1024, "rms_norm_eps": 1e-05, "tie_word_embeddings": False,
    "initializer_range": 0.02, "router_aux_loss_coef": AUX_LOSS_COEF,
    "bos_token_id": EOT, "eos_token_id": EOT, "pad_token_id": PAD,
}

T0 = time.time()


def log(msg):
    print(f"[{time.time() - T0:7.1f}s] {msg}", flush=True)


def sha256_bytes(b):
    return hashlib.sha256(b).hexdigest()


def is_heldout(name):
    return int(hashlib.sha1(name.encode()).hexdigest(), 16) % HELDOUT_MOD == 0


# ----------------------------------------------------------------------------------------------------- corpus
def walk_py_files(label, root):
    out = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for fn in sorted(filenames):
            if fn.endswith(".py"):
                path = Path(dirpath) / fn
                out.append((f"{label}/{path.relative_to(root).as_posix()}", path))
    return out


def collect_corpus(smoke):
    stdlib = Path(sysconfig.get_paths()["stdlib"]).resolve()
    sources = [("stdlib", stdlib)]
    if not smoke:
        for pkg in EXTRA_PACKAGES:
            try:
                spec = importlib.util.find_spec(pkg)
            except Exception:
                spec = None
            if spec is not None and spec.submodule_search_locations:
                sources.append((f"site/{pkg}", Path(list(spec.submodule_search_locations)[0]).resolve()))
    docs, source_stats, skipped = [], [], {"too_large": 0, "not_utf8": 0, "empty": 0, "sources_over_cap": []}
    total_bytes = 0
    for label, root in sources:
        if total_bytes >= MAX_CORPUS_BYTES:
            skipped["sources_over_cap"].append(label)
            continue
        files = walk_py_files(label, root)
        if smoke:
            files = files[:120]
        n, nbytes = 0, 0
        for name, path in files:
            if path.is_symlink() or not path.is_file():
                continue
            raw = path.read_bytes()
            if len(raw) > MAX_FILE_BYTES:
                skipped["too_large"] += 1
                continue
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                skipped["not_utf8"] += 1
                continue
            text = text.replace("\r\n", "\n")
            if not text.strip():
                skipped["empty"] += 1
                continue
            docs.append((name, text))
            n, nbytes = n + 1, nbytes + len(text.encode())
        source_stats.append({"name": label, "root": str(root), "files": n, "bytes": nbytes})
        total_bytes += nbytes
    docs.sort(key=lambda d: d[0])
    return docs, source_stats, skipped


def split_stats(docs):
    listing = "".join(f"{name}\t{sha256_bytes(text.encode())}\n" for name, text in docs)
    return {"files": len(docs), "bytes": sum(len(t.encode()) for _, t in docs),
            "file_list_sha256": sha256_bytes(listing.encode())}


# -------------------------------------------------------------------------------------------------- tokenizer
def train_tokenizer(texts):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, min_frequency=2, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer, length=len(texts))
    assert [tok.token_to_id(t) for t in SPECIAL_TOKENS] == [EOT, PAD], "special token ids moved"
    return tok


def tokenizer_config(tokenizer_class):
    return {"tokenizer_class": tokenizer_class, "bos_token": SPECIAL_TOKENS[EOT], "eos_token": SPECIAL_TOKENS[EOT],
            "pad_token": SPECIAL_TOKENS[PAD], "unk_token": None, "add_bos_token": False, "add_eos_token": False,
            "model_max_length": MODEL_CONFIG["max_position_embeddings"], "clean_up_tokenization_spaces": False}


def check_auto_tokenizer(model_dir, tok, samples):
    """Write tokenizer_config.json with the first class name AutoTokenizer accepts and that encodes/decodes as the
    tokenizers library does; return the result (the last candidate's config stays written if none passes)."""
    result = {"passed": False, "tries": []}
    for cls in ("PreTrainedTokenizerFast", "TokenizersBackend"):
        write_json(model_dir / "tokenizer_config.json", tokenizer_config(cls))
        attempt = {"tokenizer_class": cls}
        try:
            from transformers import AutoTokenizer
            at = AutoTokenizer.from_pretrained(str(model_dir))
            attempt["loaded_as"] = type(at).__name__
            attempt["bos_eos_pad"] = [at.bos_token, at.eos_token, at.pad_token]
            mismatches = []
            for text in samples:
                want = tok.encode(text).ids
                got = at(text)["input_ids"]
                if list(got) != want:
                    mismatches.append({"text": text[:80], "want": want[:20], "got": list(got)[:20]})
                elif at.decode(want) != tok.decode(want, skip_special_tokens=False):
                    mismatches.append({"text": text[:80], "decode_differs": at.decode(want)[:80]})
            attempt["mismatches"] = mismatches
            attempt["passed"] = not mismatches and attempt["bos_eos_pad"][:2] == [SPECIAL_TOKENS[EOT]] * 2
        except Exception as exc:
            attempt["passed"] = False
            attempt["error"] = "".join(traceback.format_exception_only(exc)).strip()[:2000]
        result["tries"].append(attempt)
        if attempt["passed"]:
            result.update(passed=True, tokenizer_class=cls)
            break
    return result


# ------------------------------------------------------------------------------------------------------ model
def build_model(vocab_size):
    cfg_dict = dict(MODEL_CONFIG, vocab_size=vocab_size)
    rest = {k: v for k, v in cfg_dict.items() if k != "model_type"}
    cfg = AutoConfig.for_model(cfg_dict["model_type"], **rest)
    torch.manual_seed(INIT_SEED)
    model = transformers.GptOssForCausalLM._from_config(cfg, attn_implementation="eager", dtype=torch.float32)
    if hasattr(model, "set_experts_implementation"):  # 5.x: plain per-expert loop rather than grouped_mm kernels
        model.set_experts_implementation("eager")
    return model


def param_counts(model):
    total = sum(p.numel() for p in model.parameters())
    experts = sum(p.numel() for n, p in model.named_parameters() if ".experts." in n)
    embed = sum(p.numel() for n, p in model.named_parameters() if n.startswith(("model.embed_tokens", "lm_head")))
    cfg = model.config
    active = total - experts + experts * cfg.num_experts_per_tok // cfg.num_local_experts
    return {"total": total, "experts": experts, "embedding_and_lm_head": embed, "active_per_token": active,
            "non_embedding": total - embed}


def lr_at(step, total_steps):
    if step < WARMUP:
        return LR * (step + 1) / WARMUP
    frac = min(1.0, (step - WARMUP) / max(1, total_steps - WARMUP))
    return LR * (MIN_LR_FRACTION + (1 - MIN_LR_FRACTION) * 0.5 * (1 + math.cos(math.pi * frac)))


def train(model, stream, dev, args):
    """AdamW on random SEQ-token windows; returns the training record."""
    torch.set_float32_matmul_precision("high")  # TF32 matmuls while training
    model.to(dev).train()
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WEIGHT_DECAY},
                             {"params": no_decay, "weight_decay": 0.0}], lr=LR, betas=BETAS, eps=1e-8)
    batch = 4 if args.smoke else BATCH
    gen = torch.Generator().manual_seed(DATA_SEED)
    stream_dev = stream.to(dev)
    offsets = torch.arange(SEQ + 1, device=dev)
    total_steps = args.steps if args.steps else None
    use_aux, curve, calib = True, [], {}
    step_time = None
    record = {"batch": batch, "seq": SEQ, "lr": LR, "min_lr_fraction": MIN_LR_FRACTION, "warmup": WARMUP,
              "betas": list(BETAS), "weight_decay": WEIGHT_DECAY, "grad_clip": GRAD_CLIP,
              "aux_loss_coef": AUX_LOSS_COEF, "precision": "fp32 weights and activations, TF32 matmuls "
              "(torch.set_float32_matmul_precision('high')), no autocast", "attn_implementation": "eager",
              "experts_implementation": "eager", "device": str(dev)}
    t_start = time.perf_counter()
    step = 0
    while True:
        if total_steps is not None and step >= total_steps:
            break
        if step in (CALIB_FROM, CALIB_TO) and step not in calib:
            if dev.type == "cuda":
                torch.cuda.synchronize()
            calib[step] = time.perf_counter()
        if total_steps is None and step == CALIB_TO:
            step_time = (calib[CALIB_TO] - calib[CALIB_FROM]) / (CALIB_TO - CALIB_FROM)
            spent = calib[CALIB_TO] - t_start
            n = int((args.train_seconds - spent) / step_time) + CALIB_TO
            if not args.smoke:
                n = n // 100 * 100
            total_steps = max(CALIB_TO + 1, min(MAX_STEPS, n))
            record["calibration"] = {"seconds_per_step": step_time, "seconds_before_calibration": spent,
                                     "budget_seconds": args.train_seconds, "chosen_steps": total_steps}
            log(f"calibration: {step_time * 1000:.1f} ms/step -> {total_steps} steps")
            continue
        elapsed = time.perf_counter() - t_start
        if elapsed > args.train_seconds * 1.3 and not args.steps:
            record["stopped_early_at_step"] = step
            log(f"time cap reached at step {step}; stopping")
            break
        lr = lr_at(step, total_steps if total_steps else MAX_STEPS)
        for group in opt.param_groups:
            group["lr"] = lr
        starts = torch.randint(0, stream.numel() - SEQ - 1, (batch,), generator=gen).to(dev)
        window = stream_dev[starts[:, None] + offsets].long()
        inputs, targets = window[:, :-1], window[:, 1:]
        aux = None
        if use_aux:
            try:
                out = model(input_ids=inputs, output_router_logits=True, use_cache=False)
                aux = out.aux_loss if isinstance(out.aux_loss, torch.Tensor) else None
            except Exception as exc:
                log(f"output_router_logits failed ({exc!r}); training without the router aux loss")
                use_aux = False
                record["aux_loss_error"] = repr(exc)[:500]
        if not use_aux:
            out = model(input_ids=inputs, use_cache=False)
        if use_aux and aux is None and step == 0:
            log("no aux_loss returned; training without it")
            record["aux_loss_error"] = "model returned no aux_loss"
            use_aux = False
        ce = F.cross_entropy(out.logits.float().reshape(-1, out.logits.shape[-1]), targets.reshape(-1))
        loss = ce + AUX_LOSS_COEF * aux if aux is not None else ce
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), GRAD_CLIP)
        opt.step()
        last = total_steps is not None and step == total_steps - 1
        if step % 100 == 0 or last or (args.smoke and step % 5 == 0):
            row = {"step": step, "lr": lr, "ce": ce.item(), "aux": aux.item() if aux is not None else None,
                   "grad_norm": gnorm.item(), "seconds": time.perf_counter() - t_start}
            curve.append(row)
            log(f"step {step:5d}  lr {lr:.2e}  ce {row['ce']:.4f}  aux {row['aux']}  |g| {row['grad_norm']:.3f}")
        step += 1
    if dev.type == "cuda":
        torch.cuda.synchronize()
    record.update(steps=step, seconds=time.perf_counter() - t_start, tokens_seen=step * batch * SEQ,
                  router_aux_loss_used=use_aux, loss_curve=curve)
    record["note"] = ("step count chosen by timing steps 10..40 against the budget; rerun with --steps "
                      f"{step} to repeat. GPU reductions (index_add_, cuBLAS) are not bit-deterministic, so a "
                      "rerun matches closely, not bitwise.")
    log(f"trained {step} steps in {record['seconds']:.1f}s ({record['tokens_seen'] / 1e6:.1f}M tokens)")
    return record


@torch.no_grad()
def mean_nll(model, windows, dev, batch=128):
    """Mean negative log-likelihood (nats) of token t+1 given 0..t over all windows [N, SEQ] (SEQ-1 per window)."""
    model.eval()
    total, count = 0.0, 0
    for i in range(0, windows.shape[0], batch):
        x = windows[i:i + batch].to(dev)
        logits = model(input_ids=x, use_cache=False).logits.float()
        lp = logits[:, :-1].log_softmax(-1).gather(-1, x[:, 1:, None]).squeeze(-1)
        total += lp.double().sum().item()
        count += lp.numel()
    return -total / count


def evaluate(label, model, train_windows, heldout_windows, dev):
    torch.set_float32_matmul_precision("highest")  # plain fp32 for every evaluation
    res = {"train_loss": mean_nll(model, train_windows, dev), "heldout_loss": mean_nll(model, heldout_windows, dev)}
    res["heldout_perplexity"] = math.exp(res["heldout_loss"])
    res["train_perplexity"] = math.exp(res["train_loss"])
    log(f"eval {label}: train {res['train_loss']:.4f}  heldout {res['heldout_loss']:.4f} "
        f"(ppl {res['heldout_perplexity']:.2f})")
    return res


# ------------------------------------------------------------------------------------------------- references
@torch.no_grad()
def window_logprobs(model, ids):
    logits = model(input_ids=ids[None], use_cache=False).logits[0]
    return logits.double().log_softmax(-1)[:-1].gather(-1, ids[1:, None]).squeeze(-1).float()


def pick_fixture_windows(heldout_docs_ids, heldout_windows):
    """Document-start windows: [<|endoftext|>] + the first SEQ-1 tokens of held-out files, spread over the list."""
    cands = [ids for ids in heldout_docs_ids if ids.numel() >= SEQ]
    if len(cands) >= FIXTURE_WINDOWS:
        picks = [cands[k * len(cands) // FIXTURE_WINDOWS][:SEQ] for k in range(FIXTURE_WINDOWS)]
        return torch.stack(picks).long(), "document starts: [<|endoftext|>] + first 255 tokens of held-out files " \
            "with >= 255 tokens (sorted by name), picks k*len//8 for k=0..7"
    n = min(FIXTURE_WINDOWS, heldout_windows.shape[0])
    return heldout_windows[:n].clone().long(), "first non-overlapping windows of the held-out stream"


# ------------------------------------------------------------------------------------------------------- card
def model_card(rep):
    p, tr, ev = rep["parameters"], rep["training"], rep["evaluation"]
    c = rep["config_summary"]
    fin, fp = ev["mxfp4_bf16_on_disk"], ev["trained_fp32"]
    lines = [
        f"# {MODEL_NAME}",
        "",
        "A small gpt-oss (`GptOssForCausalLM`, MXFP4 experts) trained on Python source code: day0's bundled default "
        "model, so that what it generates means something. It writes plausible-looking Python, not correct "
        "programs.",
        "",
        "## Model",
        f"- {c['num_hidden_layers']} layers alternating sliding-window ({c['sliding_window']}) and full attention, "
        f"hidden {c['hidden_size']}, {c['num_attention_heads']} heads x {c['head_dim']} with "
        f"{c['num_key_value_heads']} KV heads, attention sinks, YaRN RoPE (factor 4, original context "
        f"{c['rope_parameters']['original_max_position_embeddings']}, max positions {c['max_position_embeddings']})",
        f"- MoE: {c['num_local_experts']} experts of intermediate size {c['intermediate_size']}, top-"
        f"{c['num_experts_per_tok']}, experts stored as MXFP4 (the rest bf16), untied embeddings",
        f"- parameters: {p['total']:,} total, {p['experts']:,} in experts, {p['active_per_token']:,} active per "
        f"token, {p['embedding_and_lm_head']:,} in embeddings + lm_head",
        f"- vocabulary: {rep['tokenizer']['vocab_size']} byte-level BPE tokens (GPT-2 pre-tokenizer regex), "
        f"`<|endoftext|>` (id 0, bos = eos = document separator) and `<|pad|>` (id 1)",
        "",
        "## Data",
        f"The `.py` files of Python {rep['versions']['python']}'s standard library and of a few installed "
        f"packages ({', '.join(s['name'] for s in rep['corpus']['sources'][1:]) or 'none'}), read in sorted order. "
        f"A file is held out when int(sha1(name), 16) % {HELDOUT_MOD} == 0. Training: "
        f"{rep['corpus']['train']['files']} files, {rep['corpus']['train']['bytes']:,} bytes, "
        f"{rep['corpus']['train']['tokens']:,} tokens; held out: {rep['corpus']['heldout']['files']} files, "
        f"{rep['corpus']['heldout']['bytes']:,} bytes, {rep['corpus']['heldout']['tokens']:,} tokens "
        f"({rep['tokenizer']['heldout_bytes_per_token']:.2f} bytes/token). The tokenizer saw the training files "
        "only. These sources are under the PSF and their own permissive licences.",
        "",
        "## Training",
        f"{tr['steps']} AdamW steps of {tr['batch']} x {tr['seq']} tokens ({tr['tokens_seen'] / 1e6:.1f}M tokens), "
        f"LR {tr['lr']} with {tr['warmup']} warmup steps and cosine decay to {tr['min_lr_fraction']}x, weight decay "
        f"{tr['weight_decay']}, clip {tr['grad_clip']}, router load-balancing loss x{tr['aux_loss_coef']} "
        f"({'used' if tr['router_aux_loss_used'] else 'not available'}); {tr['precision']}. "
        f"{tr['seconds']:.0f} s of training on one {rep['versions'].get('gpu', 'GPU')}, seeds {rep['seeds']}.",
        "",
        "## Evaluation (mean next-token loss in nats; 255 predictions per 256-token window, fp32)",
        "",
        "| weights | train loss | held-out loss | held-out perplexity |",
        "| --- | --- | --- | --- |",
    ]
    for key, label in (("trained_fp32", "as trained (fp32)"), ("bf16_all", "everything rounded to bf16"),
                       ("mxfp4_bf16_on_disk", "as shipped: MXFP4 experts + bf16")):
        if key in ev:
            e = ev[key]
            lines.append(f"| {label} | {e['train_loss']:.4f} | {e['heldout_loss']:.4f} | "
                         f"{e['heldout_perplexity']:.2f} |")
    lines += [
        f"| uniform guess | {rep['uniform_baseline']['loss']:.4f} | {rep['uniform_baseline']['loss']:.4f} | "
        f"{rep['uniform_baseline']['perplexity']} |",
        "",
        f"MXFP4 costs {fin['heldout_loss'] - fp['heldout_loss']:+.4f} nats of held-out loss. "
        f"transformers' own MXFP4 loader reproduces the shipped expert weights bit for bit: "
        f"{rep['mxfp4_check_passed']}.",
        "",
        "## Greedy samples (48 tokens, full no-cache forwards of the fp32 model holding the shipped values)",
        "",
    ]
    for g in rep["greedy_summary"]:
        lines += ["```python", g["prompt"] + g["continuation_text"], "```", ""]
    lines += [
        "## Reproduce",
        "On a machine with a GPU, torch, transformers 5.17 and tokenizers (no network needed):",
        "",
        "```sh",
        f"python3 tools/reference/train_tiny_gpt_oss.py --out-root OUT --steps {tr['steps']}",
        "```",
        "",
        "It writes `OUT/models/pycoder-tiny/` and `OUT/tests/data/pycoder_tiny_reference/` (held-out log-probs, "
        "greedy continuations, report.json with every figure here). The corpus depends on the machine's Python "
        "and packages; report.json records the file lists' hashes. GPU training is not bit-deterministic.",
        "",
    ]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------------- main
def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out-root", default=".", type=Path)
    ap.add_argument("--smoke", action="store_true", help="a few files and steps, to try every stage quickly")
    ap.add_argument("--train-seconds", type=float, default=170.0, help="time budget used to pick the step count")
    ap.add_argument("--steps", type=int, default=0, help="fixed step count (overrides --train-seconds)")
    ap.add_argument("--save-state", type=Path, help="write the trained fp32 weights (+ .json training record)")
    ap.add_argument("--init-state", type=Path, help="skip training: load weights written by --save-state")
    args = ap.parse_args()
    if args.smoke:
        args.train_seconds = min(args.train_seconds, 6.0)
    model_dir = args.out_root / "models" / MODEL_NAME
    ref_dir = args.out_root / "tests" / "data" / "pycoder_tiny_reference"
    model_dir.mkdir(parents=True, exist_ok=True)
    ref_dir.mkdir(parents=True, exist_ok=True)
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    versions = {"python": platform.python_version(), "torch": torch.__version__,
                "transformers": transformers.__version__, "tokenizers": tokenizers.__version__,
                "safetensors": safetensors.__version__, "cuda": torch.version.cuda}
    if dev.type == "cuda":
        versions["gpu"] = torch.cuda.get_device_name(0)
    log(f"versions {versions}, device {dev}, smoke={args.smoke}")
    errors = []

    # corpus + tokenizer
    docs, source_stats, skipped = collect_corpus(args.smoke)
    train_docs = [d for d in docs if not is_heldout(d[0])]
    heldout_docs = [d for d in docs if is_heldout(d[0])]
    log(f"corpus: {len(docs)} files ({sum(s['bytes'] for s in source_stats):,} bytes) from "
        f"{[(s['name'], s['files']) for s in source_stats]}; {len(heldout_docs)} held out; skipped {skipped}")
    tok = train_tokenizer([t for _, t in train_docs])
    tok.save(str(model_dir / "tokenizer.json"))
    vocab = tok.get_vocab_size()
    log(f"tokenizer: {vocab} tokens")

    def encode_docs(ds):
        encs = tok.encode_batch([t for _, t in ds], add_special_tokens=False)
        return [torch.tensor([EOT] + e.ids, dtype=torch.int32) for e in encs]

    train_ids, heldout_ids = encode_docs(train_docs), encode_docs(heldout_docs)
    train_stream, heldout_stream = torch.cat(train_ids), torch.cat(heldout_ids)
    roundtrip_bad = sum(tok.decode(ids[1:].tolist(), skip_special_tokens=False) != text
                        for ids, (_, text) in zip(heldout_ids, heldout_docs))
    corpus = {"sources": source_stats, "skipped": skipped, "max_file_bytes": MAX_FILE_BYTES,
              "heldout_rule": f"int(sha1(name), 16) % {HELDOUT_MOD} == 0", "line_endings": "CRLF -> LF",
              "document_format": "<|endoftext|> + file text, concatenated in name order",
              "train": dict(split_stats(train_docs), tokens=int(train_stream.numel())),
              "heldout": dict(split_stats(heldout_docs), tokens=int(heldout_stream.numel()))}
    tokenizer_info = {"vocab_size": vocab, "special_tokens": SPECIAL_TOKENS, "model": "BPE (byte-level)",
                      "pre_tokenizer": "ByteLevel(add_prefix_space=False, use_regex=True)", "decoder": "ByteLevel",
                      "normalizer": None, "post_processor": None, "trained_on": "training files only",
                      "heldout_bytes_per_token": corpus["heldout"]["bytes"] / max(1, corpus["heldout"]["tokens"]
                                                                                     - len(heldout_ids)),
                      "heldout_roundtrip_failures": int(roundtrip_bad),
                      "tokenizer_json_sha256": sha256_bytes((model_dir / "tokenizer.json").read_bytes())}
    log(f"tokens: train {train_stream.numel():,}, heldout {heldout_stream.numel():,}; "
        f"{tokenizer_info['heldout_bytes_per_token']:.2f} bytes/token; round-trip failures {roundtrip_bad}")

    n_h = heldout_stream.numel() // SEQ
    heldout_windows = heldout_stream[:n_h * SEQ].view(n_h, SEQ).long()
    n_t = min(TRAIN_EVAL_WINDOWS, train_stream.numel() // SEQ)
    span = train_stream.numel() - SEQ
    train_windows = torch.stack([train_stream[k * span // n_t:k * span // n_t + SEQ] for k in range(n_t)]).long()

    # model + training
    model = build_model(vocab)
    params = param_counts(model)
    log(f"parameters: {params}")
    if args.init_state:
        model.load_state_dict(torch.load(args.init_state, map_location="cpu"))
        train_record = json.loads(args.init_state.with_suffix(".json").read_text())
        train_record["loaded_from_state"] = True
        log(f"loaded trained weights from {args.init_state}")
    else:
        train_record = train(model, train_stream, dev, args)
        if args.save_state:
            torch.save({k: v.detach().cpu() for k, v in model.state_dict().items()}, args.save_state)
            args.save_state.with_suffix(".json").write_text(json.dumps(train_record, indent=2))
    model.to(dev)

    evaluation = {}
    try:
        evaluation["trained_fp32"] = evaluate("trained fp32", model, train_windows, heldout_windows, dev)
        m16 = copy.deepcopy(model).cpu()
        with torch.no_grad():
            for p in m16.parameters():
                p.copy_(p.to(torch.bfloat16).float())
        evaluation["bf16_all"] = evaluate("all bf16", m16.to(dev), train_windows, heldout_windows, dev)
        del m16
    except Exception:
        errors.append("evaluation before export: " + traceback.format_exc()[-2000:])
        log(errors[-1])

    # export: MXFP4 experts + bf16 rest, held exactly by an fp32 CPU model
    model = model.cpu().eval()
    with torch.no_grad():
        expert_tensors = quantize_experts(model)
        round_non_experts_to_bf16(model)
    dequant_ok = True
    params_by_name = dict(model.named_parameters())
    for name in [n for n in params_by_name if n.endswith(EXPERT_MATRICES)]:
        deq = dequantize_mxfp4(expert_tensors[name + "_blocks"], expert_tensors[name + "_scales"])
        dequant_ok &= torch.equal(deq.transpose(1, 2), params_by_name[name].detach())
    log(f"our dequantiser reproduces the quantised experts: {dequant_ok}")
    on_disk_bytes = save_checkpoint(model_dir, model, expert_tensors)
    config = write_config(model_dir, model, MODEL_CONFIG)
    try:
        evaluation["mxfp4_bf16_on_disk"] = evaluate("mxfp4 + bf16 (on disk)", copy.deepcopy(model).to(dev),
                                                    train_windows, heldout_windows, dev)
    except Exception:
        errors.append("evaluation after export: " + traceback.format_exc()[-2000:])
        log(errors[-1])

    # references on CPU, fp32, one thread, eager, full no-cache forwards
    torch.set_num_threads(1)
    torch.set_float32_matmul_precision("highest")
    metadata = {"fixture": json.dumps({"model": MODEL_NAME, "transformers": transformers.__version__,
                                       "torch": torch.__version__, "seeds": SEEDS})}
    fx_ids, fx_how = pick_fixture_windows(heldout_ids, heldout_windows)
    fx_lp = torch.stack([window_logprobs(model, w) for w in fx_ids])
    save_file({"input_ids": fx_ids.contiguous(), "logprobs": fx_lp.contiguous()}, str(ref_dir / "heldout.safetensors"),
              metadata=metadata)
    fx_mean = fx_lp.double().mean().item()
    fixture_info = {"windows": int(fx_ids.shape[0]), "selection": fx_how, "mean_logprob": fx_mean,
                    "perplexity": math.exp(-fx_mean), "min_logprob": fx_lp.min().item()}
    if dev.type == "cuda":
        try:
            gm = copy.deepcopy(model).to(dev).eval()
            with torch.no_grad():
                g_lp = torch.stack([window_logprobs(gm, w.to(dev)).cpu() for w in fx_ids])
            fixture_info["gpu_fp32_vs_cpu_max_abs_logprob_diff"] = (g_lp - fx_lp).abs().max().item()
            del gm
        except Exception:
            errors.append("gpu fixture cross-check: " + traceback.format_exc()[-2000:])
    log(f"heldout fixture: {fixture_info}")

    greedy, greedy_summary = [], []
    for text in PROMPTS:
        enc = tok.encode(text)  # add_special_tokens=True by default; no post-processor, so nothing is added
        ids = torch.tensor(enc.ids, dtype=torch.long)
        g_ids, g_logits = greedy_without_cache(model, ids, GREEDY_STEPS)
        top2 = g_logits.topk(2, dim=-1).values
        margins = top2[:, 0] - top2[:, 1]
        cont_text = tok.decode(g_ids.tolist(), skip_special_tokens=False)
        try:
            cached = cached_decode_max_diff(model, ids, g_ids, g_logits)
        except Exception as exc:
            cached = repr(exc)[:300]
        greedy.append({"prompt": text, "prompt_ids": enc.ids, "greedy_ids": g_ids.tolist(),
                       "continuation_text": cont_text,
                       "full_text": tok.decode(enc.ids + g_ids.tolist(), skip_special_tokens=False),
                       "min_top1_top2_logit_margin": margins.min().item(),
                       "min_margin_step": int(margins.argmin().item()),
                       "cached_vs_full_max_abs_logit_diff": cached})
        greedy_summary.append({"prompt": text, "continuation_text": cont_text,
                               "min_top1_top2_logit_margin": margins.min().item()})
        log(f"greedy {text!r} -> {cont_text!r} (min margin {margins.min().item():.4f}, cached diff {cached})")
    write_json(ref_dir / "greedy.json", {
        "model": f"models/{MODEL_NAME}", "steps": GREEDY_STEPS,
        "how": "token ids from tokenizer.json (tokenizers' encode with add_special_tokens=True, which adds nothing "
               "since there is no post-processor); then 48 times: full forward of the whole sequence without a "
               "cache (fp32 model holding exactly the on-disk values, eager attention, CPU, one thread), append "
               "argmax of the last position's logits. Texts decoded with skip_special_tokens=False. Prompts end "
               "in a word or punctuation, not whitespace (the GPT-2 regex gives an indentation run's last space "
               "to the next word, so a trailing newline/indent would be tokenised unlike in any training file).",
        "prompts": greedy})

    # transformers' loaders (last: they must not influence the references above)
    tok_check = check_auto_tokenizer(model_dir, tok, PROMPTS + [g["full_text"] for g in greedy]
                                     + [t[:2000] for _, t in heldout_docs[:20]])
    log(f"AutoTokenizer check: passed={tok_check['passed']} {tok_check['tries'][-1]}")
    mxfp4 = check_transformers_mxfp4_load(model_dir, model)
    for label, res in mxfp4.items():
        log(f"mxfp4 load ({label}): " + ", ".join(f"{k}={v}" for k, v in res.items()))
    mxfp4_passed = all(r.get("passed") for r in mxfp4.values())

    (model_dir / "MODEL_CARD.md").unlink(missing_ok=True)
    model_files = {f.name: f.stat().st_size for f in sorted(model_dir.iterdir()) if f.is_file()}
    uniform = {"loss": math.log(vocab), "perplexity": vocab}
    report = {
        "model": MODEL_NAME, "smoke": args.smoke, "versions": versions, "seeds": SEEDS,
        "corpus": corpus, "tokenizer": tokenizer_info, "config": config,
        "config_summary": {k: config.get(k, MODEL_CONFIG.get(k)) for k in MODEL_CONFIG},
        "parameters": params, "training": train_record, "evaluation": evaluation,
        "evaluation_how": f"mean NLL (nats) of token t+1 given tokens 0..t, 255 predictions per 256-token window, "
                          f"fp32 on {dev} with TF32 off; held-out: all {n_h} non-overlapping windows of the held-out "
                          f"stream; train: {n_t} evenly spaced windows of the training stream",
        "uniform_baseline": uniform, "heldout_fixture": fixture_info, "greedy_summary": greedy_summary,
        "our_dequantiser_matches_quantiser": bool(dequant_ok), "mxfp4_check": mxfp4,
        "mxfp4_check_passed": mxfp4_passed, "auto_tokenizer_check": tok_check,
        "on_disk_tensor_bytes": on_disk_bytes, "model_files_bytes": model_files, "errors": errors,
        "how_made": (
            "pycoder-tiny was trained by tools/reference/train_tiny_gpt_oss.py. The .py files of the machine's Python "
            "standard library and of a few installed packages were read in name order; files with "
            f"int(sha1(name), 16) % {HELDOUT_MOD} == 0 were held out. A byte-level BPE tokenizer (GPT-2 regex, "
            f"{vocab} tokens with <|endoftext|> and <|pad|>) was trained with `tokenizers` on the training files, "
            "and each file was encoded as <|endoftext|> + text. A GptOssForCausalLM (4 layers, hidden 128, 8 "
            "experts of 192, top-2, sinks, sliding window 64 on even layers, YaRN) was built with transformers "
            "after torch.manual_seed(0) and trained on the GPU with AdamW on random 256-token windows (generator "
            "seeded 1), fp32 with TF32 matmuls, eager attention, next-token CE plus 0.01 x router load-balancing "
            "loss, for a step count picked from a time budget. Expert matrices were then quantised to MXFP4 "
            "(groups of 32 inputs, E8M0 scale 2^ceil(log2(amax/6)), nearest E2M1 with ties to even) with the exact "
            "dequantised values written back, every other tensor was rounded to bf16, and the result was saved in "
            "the published gpt-oss layout. The fp32 model holding exactly those values gave the held-out "
            "log-probabilities and greedy continuations (CPU, one thread, eager attention, full no-cache "
            "forwards), and transformers' own MXFP4 loader was checked to reproduce its expert weights bit for bit."),
    }
    write_json(ref_dir / "report.json", report)
    try:
        (model_dir / "MODEL_CARD.md").write_text(model_card(report))
    except Exception:
        errors.append("model card: " + traceback.format_exc()[-2000:])
        log(errors[-1])
        write_json(ref_dir / "report.json", report)
    log(f"wrote {model_dir} ({sum(f.stat().st_size for f in model_dir.iterdir())} bytes) and {ref_dir}")
    if errors:
        log(f"{len(errors)} error(s): see report.json")
    if not mxfp4_passed or not dequant_ok or errors:
        sys.exit(3)  # everything was written; 1 would be an uncaught exception


if __name__ == "__main__":
    main()
