"""Writes data/tiny/{train,val}.bin and meta.pkl for `train.py --dataset=tiny`: a character-
level corpus (the source text of a few Python standard-library modules, present on every
machine with Python), encoded as nanoGPT's data/shakespeare_char/prepare.py does (uint16 ids,
90/10 split, meta.pkl holding vocab_size). Not part of nanoGPT; written for this benchmark."""

import argparse
import inspect
import pickle
from pathlib import Path

import argparse as _a
import difflib
import json
import numpy as np

parser = argparse.ArgumentParser()
parser.add_argument("--out", default="data/tiny")
args = parser.parse_args()

text = "".join(inspect.getsource(m) for m in (_a, difflib, json.decoder, json.encoder))
chars = sorted(set(text))
stoi = {ch: i for i, ch in enumerate(chars)}
ids = np.array([stoi[c] for c in text], dtype=np.uint16)
n = int(0.9 * len(ids))
out = Path(args.out)
out.mkdir(parents=True, exist_ok=True)
ids[:n].tofile(out / "train.bin")
ids[n:].tofile(out / "val.bin")
with open(out / "meta.pkl", "wb") as f:
    pickle.dump({"vocab_size": len(chars), "itos": dict(enumerate(chars)), "stoi": stoi}, f)
print(f"{len(ids):,} characters, vocab {len(chars)} -> {out}")
