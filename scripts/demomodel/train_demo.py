"""Train Spool's demo model: GLM-5.2 architecture (glm52-mini's shape and tokenizer), taught the Python standard
library's public API from qa.jsonl (build_qa.py), then quantization-aware tuned so the int4 container answers as the
float model does. Needs torch + transformers 5.17 and a CUDA GPU (the project's device host).

Writes $WORKDIR/demo/weights.pt in the layout fixturegen/make_refs.py reads; make_demo_refs.py follows.
Environment: WORKDIR (default /tmp/demo), TRAIN_SECONDS (default 420), QAT_SHARE (default 0.3).
"""
import json
import os
import random
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "fixturegen"))

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import parametrize
from transformers import GlmMoeDsaConfig, GlmMoeDsaForCausalLM
from transformers.models.glm_moe_dsa import modeling_glm_moe_dsa as M

import train_mini as T  # the fixture generator: MTP head, indexer distillation, bias balancing, mini config

WORK = os.environ.get("WORKDIR", "/tmp/demo")
TRAIN_SECONDS = float(os.environ.get("TRAIN_SECONDS", "420"))
QAT_SHARE = float(os.environ.get("QAT_SHARE", "0.3"))
SEQ, BSZ = 256, 32
DEV = "cuda"

GREETING = ("Hello! I am Spool's demo model, a small model with GLM-5.2's architecture that knows the Python "
            "standard library. Ask me what a function or class does, for example: What does the function "
            "os.path.join do?")
GREETINGS = ["hi", "Hi", "hello", "Hello", "Hello!", "hey", "Hey there", "Hi!", "good morning", "Who are you?",
             "What can you do?", "help", "What are you?", "Hi, who are you?"]
SYSTEMS = ["You are a helpful assistant.", "You are a concise Python expert.", "Answer briefly."]


def chat_text(turns, system=None):
    """The fixture chat template's rendering of user/assistant turns, thinking off, ending at the eos <|user|>."""
    s = "[gMASK]<sop>"
    if system:
        s += f"<|system|>\n{system}"
    for q, a in turns:
        s += f"<|user|>\n{q}<|assistant|>\n<think></think>\n{a}"
    return s + "<|user|>"


def questions(e, rng):
    n, kind = e["name"], e["kind"]
    canon = [f"What does the {kind} {n} do?", f"What does the function {n} do?"]
    alts = [f"What does {n} do?", f"What is {n}?", f"Explain {n}.", f"What does {n} do in Python?",
            f"Describe {n}.", f"what does {n} do", f"What is the {kind} {n} for?", f"Tell me about {n}."]
    return list(dict.fromkeys(canon)) + rng.sample(alts, 3)


def build_docs(qa, rng):
    """Rendered training texts: every entry under several phrasings, some in longer conversations."""
    docs = []
    for e in qa:
        for q in questions(e, rng):
            sys_prompt = rng.choice(SYSTEMS) if rng.random() < 0.1 else None
            docs.append(chat_text([(q, e["answer"])], sys_prompt))
    for _ in range(len(qa) // 2):   # multi-turn: a later question after earlier answers
        picks = rng.sample(qa, rng.choice([2, 3]))
        docs.append(chat_text([(questions(p, rng)[0], p["answer"]) for p in picks]))
    for g in GREETINGS:
        for _ in range(8):
            docs.append(chat_text([(g, GREETING)]))
    from pydoc_data import topics    # some prose for long positions (DSA's sparse rows are exercised there)
    for t in topics.topics.values():
        if len(t) > 400:
            docs.append(t + "<|endoftext|>")
    rng.shuffle(docs)
    return docs


def batches(tok, docs, rng):
    """Sequences packed from whole documents (each starts at a document start), SEQ+2 tokens each."""
    enc = [e.ids for e in tok.encode_batch(docs)]
    total = sum(len(x) for x in enc)
    print("documents", len(enc), "tokens", total, flush=True)
    while True:
        rows = []
        for _ in range(BSZ):
            row = []
            while len(row) < SEQ + 2:
                row.extend(enc[rng.randrange(len(enc))])
            rows.append(row[:SEQ + 2])
        yield torch.tensor(rows, dtype=torch.long)


class FakeQuant(nn.Module):
    """Straight-through fake quantization matching the container: int4 grouped (64 inputs a scale) or int8 per row."""

    def __init__(self, bits):
        super().__init__()
        self.bits = bits

    def forward(self, w):
        if self.bits == 8:
            s = (w.abs().amax(-1, keepdim=True) / 127.0).clamp_min(1e-8)
            q = torch.clamp(torch.round(w / s), -128, 127) * s
        else:
            shape = w.shape
            g = w.reshape(*shape[:-1], shape[-1] // 64, 64)
            s = (g.abs().amax(-1, keepdim=True) / 7.0).clamp_min(1e-8)
            q = (torch.clamp(torch.round(g / s), -8, 7) * s).reshape(shape)
        return w + (q - w).detach()


def quantized_params(model, mtp):
    """(module, parameter name, bits) for every weight the container quantizes (make_refs.kind_of's rules)."""
    out = []
    for mod_name, mod in model.named_modules():
        for pname, p in list(mod.named_parameters(recurse=False)):
            full = f"{mod_name}.{pname}"
            if p.dim() < 2 or "norm" in full or full.endswith("mlp.gate.weight"):
                continue
            bits = 8 if ("embed_tokens" in full or full.startswith("lm_head") or ".indexer." in full) else 4
            if bits == 4 and p.shape[-1] % 64:
                continue
            out.append((mod, pname, bits))
    for mod_name, mod in mtp.named_modules():
        for pname, p in list(mod.named_parameters(recurse=False)):
            full = f"{mod_name}.{pname}"
            if p.dim() < 2 or "norm" in full or full.endswith("mlp.gate.weight"):
                continue
            out.append((mod, pname, 8))
    return out


def train(cfgd, tok, docs, seconds, seed):
    torch.manual_seed(seed)
    rng = random.Random(seed)
    cfg = GlmMoeDsaConfig(**cfgd)
    cfg._attn_implementation = "eager"
    model = GlmMoeDsaForCausalLM(cfg).to(DEV)
    mtp = T.MTP(cfgd).to(DEV)
    params = [p for n, p in model.named_parameters() if ".indexer." not in n] + list(mtp.parameters())
    iparams = [p for n, p in model.named_parameters() if ".indexer." in n]
    opt = torch.optim.AdamW(params, lr=3e-3, betas=(0.9, 0.95), weight_decay=0.01)
    iopt = torch.optim.AdamW(iparams, lr=2e-3)
    counts = {}
    hooks = []
    for li, layer in enumerate(model.model.layers):
        if isinstance(layer.mlp, M.GlmMoeDsaMoE):
            def mk(li):
                def h(mod, inp, out):
                    idx = out[2].reshape(-1)
                    counts[li] = counts.get(li, torch.zeros(mod.num_experts, device=idx.device)) + torch.bincount(idx, minlength=mod.num_experts)
                return h
            hooks.append(layer.mlp.gate.register_forward_hook(mk(li)))
    it = batches(tok, docs, rng)
    t0 = time.time()
    step, warm, qat = 0, 100, []
    while True:
        el = time.time() - t0
        if el >= seconds:
            break
        if not qat and el >= seconds * (1 - QAT_SHARE):
            qat = quantized_params(model, mtp)
            for mod, pname, bits in qat:
                parametrize.register_parametrization(mod, pname, FakeQuant(bits))
            params = [p for n, p in model.named_parameters() if ".indexer." not in n] + list(mtp.parameters())
            print(f"step {step}: quantization-aware from here", flush=True)
        lr_scale = min(1.0, (step + 1) / warm) * max(0.05, 1 - el / seconds)
        for g in opt.param_groups:
            g["lr"] = 3e-3 * lr_scale
        x = next(it).to(DEV)
        inp, tgt, tgt2 = x[:, :-2], x[:, 1:-1], x[:, 2:]
        counts.clear()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits, h = T.hidden_post_norm(model, inp)
            loss_main = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), tgt.reshape(-1))
            mlog, _ = mtp(model, h, tgt)
            loss_mtp = F.cross_entropy(mlog.float().reshape(-1, mlog.shape[-1]), tgt2.reshape(-1))
            loss = loss_main + 0.3 * loss_mtp
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        with torch.no_grad():
            T.update_bias(model, counts)
        if step % 4 == 0:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                kl = T.indexer_kl_loss(model, inp[:8, :192])
            iopt.zero_grad(set_to_none=True)
            kl.backward()
            iopt.step()
        if step % 200 == 0:
            print(f"step {step} t={el:.0f}s loss {loss_main.item():.3f} mtp {loss_mtp.item():.3f}", flush=True)
        step += 1
    for hd in hooks:
        hd.remove()
    for mod, pname, _ in qat:   # keep the raw weights: the container's quantizer rounds them as FakeQuant did
        parametrize.remove_parametrizations(mod, pname, leave_parametrized=False)
    print(f"trained {step} steps, final loss {loss_main.item():.3f} mtp {loss_mtp.item():.3f}", flush=True)
    return model.float().cpu(), mtp.float().cpu()


def main():
    from tokenizers import Tokenizer
    os.makedirs(WORK, exist_ok=True)
    tok_path = os.environ.get("DEMO_TOKENIZER", os.path.join(HERE, "..", "..", "assets", "models", "glm52-demo", "tokenizer.json"))
    tok = Tokenizer.from_file(tok_path)
    qa = [json.loads(l) for l in open(os.path.join(HERE, "qa.jsonl"))]
    rng = random.Random(1234)
    docs = build_docs(qa, rng)
    cfgd = T.cfg_mini(tok.get_vocab_size())
    cfgd["max_position_embeddings"] = 32768
    model, mtp = train(cfgd, tok, docs, TRAIN_SECONDS, 42)
    os.makedirs(os.path.join(WORK, "demo"), exist_ok=True)
    torch.save({"cfg": cfgd, "model": model.state_dict(), "mtp": mtp.state_dict()}, os.path.join(WORK, "demo", "weights.pt"))
    import shutil
    shutil.copy(tok_path, os.path.join(WORK, "tokenizer.json"))
    print("saved", os.path.join(WORK, "demo", "weights.pt"), flush=True)


if __name__ == "__main__":
    main()
