"""`cnn`: a narrow ResNet-18 on 32x32 images with a CPU-heavy input pipeline.

Images are stored "encoded" (uint8) and each `__getitem__` decodes and augments one: random
crop with 4-pixel padding and a horizontal flip (the CIFAR recipe of He et al. 2016, sec. 4.2),
normalization, plus `decode_cost_us` of busy CPU work standing in for JPEG decoding. That cost
is what makes data loading a genuine bottleneck at num_workers=0 and what workers remove.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import Dataset

from torchdoctor.core.optimizer import make_optimizer
from torchdoctor.workloads.base import SyntheticWorkload

IMAGE_SIZE = 32
CROP_PADDING = 4
#: Per-channel mean/std used to normalize (CIFAR-10's, a realistic choice for 32x32 RGB).
MEAN = (0.4914, 0.4822, 0.4465)
STD = (0.2470, 0.2435, 0.2616)
#: SGD learning rate: He et al. 2016 (sec. 4.2) train CIFAR ResNets at 0.1 with batches of 128;
#: the linear scaling rule (Goyal et al. 2017) gives 0.025 at the default batch of 32. At 0.05
#: the loss fell from 2.3 to about 0.3 within 30 steps, in jumps (single batches at 0.2, the
#: next at 1.2), so a tuning window saw noise around a learned task rather than a curve; at
#: 0.025 it falls steadily to about 0.9 over the window, and a 10x rate or a frozen backbone
#: stands out from the run-to-run spread by 10 to 18 standard deviations (seeds 0-2).
LEARNING_RATE = 0.025


def burn_cpu(microseconds: float) -> None:
    """Keep the CPU busy for `microseconds` (a stand-in for image decoding; not a sleep)."""
    if microseconds <= 0:
        return
    deadline = time.perf_counter() + microseconds * 1e-6
    while time.perf_counter() < deadline:
        pass


class EncodedImages(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """uint8 images: a per-class low-frequency pattern plus noise, so classes are learnable."""

    def __init__(self, size: int, classes: int, seed: int, decode_cost_us: float) -> None:
        gen = torch.Generator().manual_seed(seed)
        patterns = torch.rand(classes, 3, 8, 8, generator=gen)
        patterns = F.interpolate(patterns, size=IMAGE_SIZE, mode="bilinear", align_corners=False)
        self.labels = torch.randint(classes, (size,), generator=gen)
        noise = torch.rand(size, 3, IMAGE_SIZE, IMAGE_SIZE, generator=gen) * 0.5
        images = (patterns[self.labels] * 0.5 + noise).clamp(0, 1)
        self.images = (images * 255).to(torch.uint8)
        self.seed = seed
        self.decode_cost_us = decode_cost_us
        self.mean = torch.tensor(MEAN).view(3, 1, 1)
        self.std = torch.tensor(STD).view(3, 1, 1)

    def __len__(self) -> int:
        return self.images.shape[0]

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        burn_cpu(self.decode_cost_us)
        # The augmentation depends on (seed, index) only, so any worker produces the same one.
        gen = torch.Generator().manual_seed(self.seed * 1_000_003 + index)
        image = self.images[index].float().div_(255)
        padded = F.pad(image, (CROP_PADDING,) * 4, mode="reflect")
        dx, dy = torch.randint(2 * CROP_PADDING + 1, (2,), generator=gen).tolist()
        image = padded[:, dy : dy + IMAGE_SIZE, dx : dx + IMAGE_SIZE]
        if torch.rand((), generator=gen) < 0.5:
            image = image.flip(2)
        return (image - self.mean) / self.std, self.labels[index]


class BasicBlock(nn.Module):
    """Two 3x3 convs with a residual connection (He et al. 2016, fig. 2)."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNet18(nn.Module):
    """ResNet-18 for 32x32 inputs: 3x3 stem, four stages of two blocks, global pooling."""

    def __init__(self, widths: Sequence[int], classes: int) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, widths[0], 3, padding=1, bias=False), nn.BatchNorm2d(widths[0]), nn.ReLU()
        )
        blocks: list[nn.Module] = []
        cin = widths[0]
        for stage, width in enumerate(widths):
            stride = 1 if stage == 0 else 2
            blocks += [BasicBlock(cin, width, stride), BasicBlock(width, width, 1)]
            cin = width
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Linear(cin, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.blocks(self.stem(x))
        return self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class CnnWorkload(SyntheticWorkload):
    kind = "vision"
    name = "cnn"
    description = "Narrow ResNet-18 on synthetic 32x32 images with a CPU decode/augment pipeline"
    sample_unit = "a 32x32 RGB image"

    param_names = ("width", "classes", "images", "decode_cost_us")

    def __init__(
        self,
        width: int = 16,
        classes: int = 10,
        images: int = 2048,
        decode_cost_us: float = 300.0,
        batch_size: int = 32,
    ) -> None:
        self.width, self.classes, self.images = width, classes, images
        self.decode_cost_us = decode_cost_us
        self.default_batch_size = batch_size
        self.input_shapes = {"image": (3, IMAGE_SIZE, IMAGE_SIZE)}

    def build_model(self) -> ResNet18:
        # Stage widths double like ResNet-18's 64-128-256-512, from a narrower start.
        return ResNet18([self.width * m for m in (1, 2, 4, 8)], self.classes)

    def build_dataset(self, seed: int) -> EncodedImages:
        return EncodedImages(self.images, self.classes, seed, self.decode_cost_us)

    def loss(self, output: Any, target: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(output, target)

    def build_optimizer(self, params: Iterable[nn.Parameter], impl: str) -> torch.optim.Optimizer:
        return make_optimizer(
            torch.optim.SGD, params, impl, lr=LEARNING_RATE, momentum=0.9, weight_decay=5e-4
        )

    def eval_metric(self, output: Any, target: torch.Tensor) -> float:
        """Accuracy."""
        return float((output.argmax(dim=1) == target).float().mean())

    def checkpoint_blocks(self, model: nn.Module) -> list[nn.Module]:
        assert isinstance(model, ResNet18)
        return list(model.blocks)
