"""Writes a ckpt smoke baseline (docs/smoke.md, format ckpt-smoke-baseline/1) from the torch
reference forward pass: the mean NLL, top-1 accuracy and, for every stage ckpt smoke reports
(embed, each decoder layer, final norm), the hidden state's RMS, max |x| and per-position RMS."""
import json

import torch

import families

FORMAT = "ckpt-smoke-baseline/1"


def compute(model, ids, recorded_by):
    id_tensor = torch.tensor(ids)
    with torch.no_grad():
        logits, _ = model(id_tensor)
        stages = []
        for name, h in model.stage_outputs:
            h = h.float()
            stages.append({"stage": name, "rms": h.pow(2).mean().sqrt().item(), "max_abs": h.abs().max().item(),
                           "position_rms": h.pow(2).mean(dim=-1).sqrt().tolist()})
    nll, perplexity, top1 = families.next_token_stats(logits, id_tensor)
    return {"format": FORMAT, "recorded_by": recorded_by, "family": model.cfg["model_type"], "token_ids": list(ids),
            "nll_mean": nll, "perplexity": perplexity, "top1_accuracy": top1, "stages": stages}


def write(path, doc):
    with open(path, "w") as f:
        json.dump(doc, f)
        f.write("\n")
