"""Quantize the trained demo model into the Colibri container layout, compute its float64 references with HF
transformers on the dequantized container bytes (fixturegen/make_refs.py's method), and score its answers.

Reads $WORKDIR/demo/weights.pt and $WORKDIR/tokenizer.json (train_demo.py). Writes $WORKDIR/out/glm52-demo/ (the
container), $WORKDIR/out/glm52-demo-refs/ (references) and $WORKDIR/out/quality.json (greedy answers, scored).
"""
import json
import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "fixturegen"))
os.environ.setdefault("CHAT_TEMPLATE_FILE", os.path.join(HERE, "fixture-chat.jinja"))

import torch
import make_refs as R

WORK = os.environ.get("WORKDIR", "/tmp/demo")
NAME = "glm52-demo"


def words(s):
    return re.findall(r"[a-z0-9]+", s.lower())


def score(expected, answer):
    """Similarity of the answer's opening to the docstring paragraph, word by word (0..1): twice the longest common
    subsequence of words over both lengths, the answer cut to the paragraph's length (app/demo_quality_test.go
    computes the same)."""
    e = words(expected)
    a = words(answer)[:len(e)]
    if not e and not a:
        return 1.0
    prev = [0] * (len(a) + 1)
    for x in e:
        cur = [0]
        for j, y in enumerate(a):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return 2.0 * prev[-1] / (len(e) + len(a))


def unparametrized(sd):
    """A state dict saved with quantization-aware parametrizations still attached: 'x.parametrizations.w.original'
    is the raw weight 'x.w' (the container's quantizer rounds it as the fake quantizer did)."""
    out = {}
    for k, v in sd.items():
        m = re.match(r"^(.*)\.parametrizations\.([^.]+)\.original$", k)
        out[f"{m.group(1)}.{m.group(2)}" if m else k] = v
    return out


@torch.no_grad()
def greedy_gpu(model, ids, n, eos):
    ids = list(ids)
    out = []
    for _ in range(n):
        logits = model(input_ids=torch.tensor([ids], device="cuda")).logits[0, -1]
        t = int(logits.argmax())
        if t in eos:
            break
        out.append(t)
        ids.append(t)
    return out


def main():
    from tokenizers import Tokenizer
    t0 = time.time()
    tok = Tokenizer.from_file(os.path.join(WORK, "tokenizer.json"))
    eos = [tok.token_to_id(s) for s in ["<|endoftext|>", "<|user|>", "<|observation|>"]]
    blob = torch.load(os.path.join(WORK, "demo", "weights.pt"), map_location="cpu")
    cfgd, sd, msd = blob["cfg"], unparametrized(blob["model"]), unparametrized(blob["mtp"])
    out = os.path.join(WORK, "out")
    d = os.path.join(out, NAME)
    rd = os.path.join(out, NAME + "-refs")
    os.makedirs(d, exist_ok=True)
    os.makedirs(rd, exist_ok=True)
    shard_of = lambda li: "out-00000.safetensors" if li < 3 else "out-00001.safetensors"
    split = (2, 17)
    shards, deq, mdeq = R.quantize_model(cfgd, sd, msd, 64, shard_of, split)
    for fn, s in shards.items():
        s.write(os.path.join(d, fn))
    R.write_meta(d, dict(cfgd, schedule_by_freq=False), os.path.join(WORK, "tokenizer.json"), eos)
    model, mtp = R.build_hf(cfgd, deq, mdeq)
    print("container written", round(time.time() - t0, 1), "s", flush=True)

    # Quality first (GPU, float32 on the dequantized container): the figure that decides whether to keep the model.
    chat = lambda q: tok.encode(f"[gMASK]<sop><|user|>\n{q}<|assistant|>\n<think></think>\n").ids
    qa = {json.loads(l)["name"]: json.loads(l) for l in open(os.path.join(HERE, "qa.jsonl"))}
    names = [l.strip() for l in open(os.path.join(HERE, "eval_names.txt")) if l.strip()]
    names = names[:int(os.environ.get("EVAL_LIMIT", len(names)))]
    import copy
    gm = copy.deepcopy(model).float().cuda().eval()
    results = []
    for n in names:
        e = qa[n]
        q = f"What does the {'class' if e['kind'] == 'class' else 'function'} {n} do?"
        ans = tok.decode(greedy_gpu(gm, chat(q), 120, eos), skip_special_tokens=False)
        ans = ans.split("</think>")[-1].strip()
        results.append({"name": n, "question": q, "expected": e["answer"], "answer": ans, "score": round(score(e["answer"], ans), 3)})
    ok = sum(r["score"] >= 0.6 for r in results)
    print(f"quality: {ok}/{len(results)} answers score >= 0.6 ({time.time() - t0:.0f}s)", flush=True)
    for r in results:
        print(f"  {r['score']:.2f} {r['name']}: {r['answer'][:100]}", flush=True)
    json.dump({"threshold": 0.6, "passed": ok, "total": len(results), "results": results},
              open(os.path.join(out, "quality.json"), "w"), indent=1, ensure_ascii=False)
    del gm

    prompts = [("chat", chat("What does the function os.path.join do?")),
               ("code", tok.encode("import json\n\ndef load_config(path):\n    \"\"\"").ids),
               ("long", R.long_ids(tok, cfgd["index_topk"] + 40))]
    cases = R.refs_for(NAME, model, mtp, tok, prompts, 32, rd)
    qchk = R.dump_quant_check(deq, rd, [("model.layers.1.mlp.experts.gate_up_proj", 0), ("model.layers.0.self_attn.q_b_proj.weight", None)])
    meta = {"model": NAME, "int4_group_size": 64, "split_expert": list(split),
            "precision": "float64 CPU reference, HF transformers GlmMoeDsaForCausalLM (eager) on the dequantized container",
            "mtp_convention": "MTP row i consumes enorm(embed(token[i+1])) ++ hnorm(final_norm(h[i])); dense attention over MTP rows 0..i; logits predict token[i+2]",
            "dsa_note": "dsa[layer][row] = selected key positions (unordered); rows with pos+1 <= index_topk select every causal key",
            "routes_note": "routes[layer] = per position sorted expert ids and their final (normalized, scaled) weights",
            "quant_check": qchk, "cases": cases}
    json.dump(meta, open(os.path.join(rd, "refs.json"), "w"), indent=1)
    print("references written", round(time.time() - t0, 1), "s", flush=True)


if __name__ == "__main__":
    main()
