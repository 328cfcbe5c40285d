"""Writes a small traindata.pt for train.py: the same sine waves as upstream's
generate_sine_wave.py (T=20, same seed and formula) but N=13 sequences of L=100 points
instead of 100 of 1000, so one LBFGS step takes ~1 s on a CPU core instead of minutes.
Not part of pytorch/examples; written for this benchmark."""

import numpy as np
import torch

np.random.seed(2)

T = 20
L = 100
N = 13

x = np.empty((N, L), "int64")
x[:] = np.array(range(L)) + np.random.randint(-4 * T, 4 * T, N).reshape(N, 1)
data = np.sin(x / 1.0 / T).astype("float64")
torch.save(data, open("traindata.pt", "wb"))
