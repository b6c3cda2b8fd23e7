"""Elastic layers with shared weights (Once-for-All, Cai et al. 2020).

Every layer holds the weights of its largest configuration; a smaller configuration uses a part:

    DynamicConv2d         the first ``c`` output channels (and the first input channels the
                          incoming tensor has) of a regular convolution
    DynamicDepthwiseConv  the first ``c`` channels; a smaller kernel is the centre of the next
                          larger one passed through a learned ``k*k x k*k`` kernel-transformation
                          matrix (identity at first), applied along the chain 7 -> 5 -> 3
    DynamicBatchNorm2d    the first ``c`` entries of its affine parameters *and* statistics
    DynamicSE             squeeze-and-excitation over the first ``c`` channels: the first
                          ``make_divisible(c // 4)`` reduce filters over the first ``c`` inputs,
                          and the matching corner of the expand filters (MobileNetV3's SE)
    DynamicMBConv         an inverted residual whose expansion ratio and kernel are elastic,
                          with an optional SE after the depthwise convolution;
                          ``sort_channels`` orders hidden channels by importance (L1 norm of
                          the projection weights), so that the first channels are the best ones

Value choices drive them: an expansion ratio or kernel given as a value choice of the space
language (an int carrying ``.expr``) makes the layer elastic over every value the expression can
take, and :meth:`DynamicMBConv.activate` evaluates it for an architecture. Given plain ints (as
when a space is frozen) the same classes are ordinary fixed layers of exactly that size, so a
frozen model holds tensors of the chosen shapes only. ``copy_active_from`` fills such a fixed
layer with the supernet's active weights (the extraction step).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from nasforge.space.expr import as_expr, is_choice

__all__ = [
    "DynamicConv2d",
    "DynamicDepthwiseConv",
    "DynamicBatchNorm2d",
    "DynamicSE",
    "DynamicMBConv",
    "candidates_of",
]


def candidates_of(value: Any) -> list[int]:
    """Returns every int a (possibly choice) value can take, ascending."""
    if is_choice(value):
        return sorted(int(v) for v in value.expr.candidates())
    return [int(value)]


class DynamicBatchNorm2d(nn.BatchNorm2d):
    """Returns batch norm over the first ``x.shape[1]`` channels, slicing parameters and running
    statistics (a slice is a view, so training updates the shared statistics in place)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = x.shape[1]
        factor = self.momentum if self.momentum is not None else 0.0
        if self.training and self.track_running_stats:
            assert self.num_batches_tracked is not None  # registered by track_running_stats
            self.num_batches_tracked.add_(1)
            if self.momentum is None:  # cumulative moving average, as nn.BatchNorm2d
                factor = 1.0 / float(self.num_batches_tracked)
        use_batch = self.training or not self.track_running_stats
        return F.batch_norm(
            x,
            self.running_mean[:c] if self.running_mean is not None else None,
            self.running_var[:c] if self.running_var is not None else None,
            self.weight[:c],
            self.bias[:c],
            use_batch,
            factor,
            self.eps,
        )

    @torch.no_grad()
    def copy_active_from(self, src: DynamicBatchNorm2d) -> None:
        """Copies the first ``num_features`` entries of ``src`` into this layer."""
        c = self.num_features
        for name in ("weight", "bias", "running_mean", "running_var"):
            getattr(self, name).copy_(getattr(src, name)[:c])
        # both track running statistics (the buffers above were copied): the counters exist
        assert self.num_batches_tracked is not None and src.num_batches_tracked is not None
        self.num_batches_tracked.copy_(src.num_batches_tracked)


class DynamicConv2d(nn.Module):
    """Returns a convolution (no bias) using the first ``out`` filters over the input's channels.

    Invariants: the weight is ``(max_out, max_in, k, k)``; ``forward(x, out)`` uses
    ``weight[:out, :x.shape[1]]``.
    """

    def __init__(self, max_in: int, max_out: int, kernel: int = 1, stride: int = 1) -> None:
        super().__init__()
        self.stride, self.kernel = stride, kernel
        self.weight = nn.Parameter(torch.empty(max_out, max_in, kernel, kernel))
        nn.init.kaiming_normal_(self.weight, mode="fan_out")

    def forward(self, x: torch.Tensor, out: int | None = None) -> torch.Tensor:
        w = self.weight[: out or self.weight.shape[0], : x.shape[1]]
        return F.conv2d(x, w, None, self.stride, self.kernel // 2)

    @torch.no_grad()
    def copy_active_from(self, src: DynamicConv2d) -> None:
        """Copies the leading block of ``src``'s weight that fits this layer."""
        o, i = self.weight.shape[:2]
        self.weight.copy_(src.weight[:o, :i])


class DynamicDepthwiseConv(nn.Module):
    """Returns a depthwise convolution with elastic channels and kernel size.

    The kernel of size ``k`` is computed from the largest: take the centre ``k' x k'`` of the
    current kernel (starting from the largest), flatten it and multiply it by the matrix
    ``transforms["{k}to{k'}"]`` (shared by all channels), until ``k' == k``.

    Invariants: with identity matrices a smaller kernel is exactly the centre of the largest;
    ``kernels`` is ascending; the weight is ``(max_channels, 1, max(kernels), max(kernels))``.
    """

    def __init__(self, max_channels: int, kernels: list[int], stride: int = 1) -> None:
        super().__init__()
        self.kernels = sorted(kernels)
        self.stride = stride
        k = self.kernels[-1]
        self.weight = nn.Parameter(torch.empty(max_channels, 1, k, k))
        nn.init.kaiming_normal_(self.weight, mode="fan_out")
        self.transforms = nn.ParameterDict()
        for big, small in zip(self.kernels[:0:-1], self.kernels[-2::-1]):
            self.transforms[f"{big}to{small}"] = nn.Parameter(torch.eye(small * small))

    def kernel_weight(self, channels: int, kernel: int) -> torch.Tensor:
        """Returns the ``(channels, 1, kernel, kernel)`` weight of one configuration."""
        w = self.weight[:channels]
        cur = self.kernels[-1]
        for small in reversed(self.kernels[:-1]):
            if cur <= kernel:
                break
            start = (cur - small) // 2
            centre = w[:, :, start : start + small, start : start + small]
            matrix = self.transforms[f"{cur}to{small}"]
            w = F.linear(centre.reshape(channels, small * small), matrix)
            w = w.reshape(channels, 1, small, small)
            cur = small
        assert cur == kernel, f"kernel {kernel} is not among {self.kernels}"
        return w

    def forward(self, x: torch.Tensor, kernel: int | None = None) -> torch.Tensor:
        c = x.shape[1]
        k = kernel or self.kernels[-1]
        w = self.kernel_weight(c, k)
        return F.conv2d(x, w, None, self.stride, k // 2, 1, c)

    @torch.no_grad()
    def copy_active_from(self, src: DynamicDepthwiseConv) -> None:
        """Copies ``src``'s transformed weight of this layer's size (channels and kernel)."""
        c, k = self.weight.shape[0], self.weight.shape[-1]
        self.weight.copy_(src.kernel_weight(c, k))


class _BiasedConv1x1(nn.Module):
    """Returns a 1x1 convolution with bias using the leading ``out x in`` block of its weights."""

    def __init__(self, max_in: int, max_out: int) -> None:
        super().__init__()
        conv = nn.Conv2d(max_in, max_out, 1, bias=True)  # PyTorch's default initialisation
        assert conv.bias is not None  # bias=True
        self.weight, self.bias = conv.weight, conv.bias

    def forward(self, x: torch.Tensor, out: int) -> torch.Tensor:
        return F.conv2d(x, self.weight[:out, : x.shape[1]], self.bias[:out])

    @torch.no_grad()
    def copy_active_from(self, src: _BiasedConv1x1) -> None:
        """Copies the leading block of ``src``'s weight and bias that fits this layer."""
        o, i = self.weight.shape[:2]
        self.weight.copy_(src.weight[:o, :i])
        self.bias.copy_(src.bias[:o])


class DynamicSE(nn.Module):
    """Returns ``x * hsigmoid(expand(relu(reduce(mean(x)))))`` with elastic channels: for an
    input of ``c`` channels the hidden width is ``make_divisible(c // 4, divisor)`` and the
    1x1 convolutions (with bias) use the leading corner of the largest weights.

    Invariants: ``reduce.weight`` is ``(hidden(max_channels), max_channels, 1, 1)`` and
    ``expand.weight`` the transposed shape; at ``c == max_channels`` it is an ordinary SE module.
    """

    def __init__(self, max_channels: int, divisor: int = 8, hidden: int | None = None) -> None:
        super().__init__()
        self.divisor = divisor
        self.fixed_hidden = hidden  # a frozen layer of a latency-table shape has its own width
        width = hidden or self.hidden(max_channels)
        self.reduce = _BiasedConv1x1(max_channels, width)
        self.expand = _BiasedConv1x1(width, max_channels)

    def hidden(self, channels: int) -> int:
        """Returns the hidden width for ``channels`` input channels."""
        if self.fixed_hidden:
            return self.fixed_hidden
        from nasforge.ofa.spaces import make_divisible  # pure

        return make_divisible(channels // 4, self.divisor)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = x.shape[1]
        y = F.relu(self.reduce(x.mean(dim=(2, 3), keepdim=True), self.hidden(c)))
        return x * F.hardsigmoid(self.expand(y, c))

    @torch.no_grad()
    def permute(self, order: torch.Tensor) -> None:
        """Reorders the channels (as the hidden channels of the enclosing layer were), then its
        own hidden units by importance (L1 norm of their expand filters, largest first)."""
        self.expand.weight.copy_(self.expand.weight[order])
        self.expand.bias.copy_(self.expand.bias[order])
        self.reduce.weight.copy_(self.reduce.weight[:, order])
        inner = torch.argsort(self.expand.weight.abs().sum(dim=(0, 2, 3)), descending=True)
        self.expand.weight.copy_(self.expand.weight[:, inner])
        self.reduce.weight.copy_(self.reduce.weight[inner])
        self.reduce.bias.copy_(self.reduce.bias[inner])


def _activation(hswish: bool) -> nn.Module:
    return nn.Hardswish() if hswish else nn.ReLU()


class DynamicMBConv(nn.Module):
    """Returns an inverted residual (1x1 expand, depthwise k x k, 1x1 project) with elastic
    expansion ratio and kernel; a residual connection when stride is 1 and widths match.

    ``expand`` and ``kernel`` are ints or value choices; ``mid_channels(e)`` maps a ratio to a
    hidden width. Without expansion (a single candidate equal to 1) there is no expand conv.
    With ``se`` a :class:`DynamicSE` follows the depthwise convolution's activation.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        expand: Any,
        kernel: Any,
        stride: int,
        hswish: bool,
        divisor: int = 8,
        se: bool = False,
    ) -> None:
        super().__init__()
        from nasforge.ofa.spaces import make_divisible  # pure

        self.in_channels, self.out_channels, self.stride = in_channels, out_channels, stride
        self._expand_expr = as_expr(expand) if is_choice(expand) else None
        self._kernel_expr = as_expr(kernel) if is_choice(kernel) else None
        self.expands = candidates_of(expand)
        self.kernels = candidates_of(kernel)
        self._mid = {e: make_divisible(in_channels * e, divisor) for e in self.expands}
        if self.expands == [1]:
            self._mid = {1: in_channels}
        max_mid = max(self._mid.values())
        self.active_expand, self.active_kernel = self.expands[-1], self.kernels[-1]
        self.has_expand = self.expands != [1]
        if self.has_expand:
            self.expand_conv = DynamicConv2d(in_channels, max_mid, 1)
            self.expand_bn = DynamicBatchNorm2d(max_mid)
        self.dw_conv = DynamicDepthwiseConv(max_mid, self.kernels, stride)
        self.dw_bn = DynamicBatchNorm2d(max_mid)
        self.se = DynamicSE(max_mid, divisor) if se else None
        self.project = DynamicConv2d(max_mid, out_channels, 1)
        self.project_bn = DynamicBatchNorm2d(out_channels)
        self.act = _activation(hswish)
        self.residual = stride == 1 and in_channels == out_channels

    @property
    def active_mid(self) -> int:
        """Returns the hidden width of the active configuration."""
        return self._mid[self.active_expand]

    def activate(self, arch: Any) -> None:
        """Sets the active expansion and kernel to their values under architecture ``arch``."""
        if self._expand_expr is not None:
            self.active_expand = int(self._expand_expr.evaluate(arch))
        if self._kernel_expr is not None:
            self.active_kernel = int(self._kernel_expr.evaluate(arch))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mid = self.active_mid
        h = x
        if self.has_expand:
            h = self.act(self.expand_bn(self.expand_conv(h, mid)))
        h = self.act(self.dw_bn(self.dw_conv(h, self.active_kernel)))
        if self.se is not None:
            h = self.se(h)
        h = self.project_bn(self.project(h))
        return x + h if self.residual else h

    @torch.no_grad()
    def sort_channels(self) -> None:
        """Reorders hidden channels by importance (L1 norm of their projection weights, largest
        first), so that narrower configurations keep the most important ones. The full
        configuration computes the same function before and after."""
        importance = self.project.weight.abs().sum(dim=(0, 2, 3))
        order = torch.argsort(importance, descending=True)
        self.project.weight.copy_(self.project.weight[:, order])
        self.dw_conv.weight.copy_(self.dw_conv.weight[order])
        if self.se is not None:
            self.se.permute(order)
        bns = [self.dw_bn]
        if self.has_expand:
            self.expand_conv.weight.copy_(self.expand_conv.weight[order])
            bns.append(self.expand_bn)
        for bn in bns:
            for name in ("weight", "bias", "running_mean", "running_var"):
                t = getattr(bn, name)
                t.copy_(t[order])

    def extra_repr(self) -> str:
        return (
            f"{self.in_channels}->{self.out_channels}, expand={self.expands}, "
            f"kernel={self.kernels}, stride={self.stride}, se={self.se is not None}"
        )
