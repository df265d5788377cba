"""The hipDNN engine plugin: ``ckspace emit --hipdnn-plugin``.

hipDNN runs the engine plugins it finds in ``HIPDNN_PLUGIN_DIR``, and PyTorch on ROCm routes its
convolutions to hipDNN when asked (``torch.backends.hipdnn``): a plugin over a ckspace library
serves PyTorch with no change to PyTorch. Beside the dispatcher, the tree gets

* ``ckspace_hipdnn.fbs`` — the part of hipDNN's FlatBuffers wire format the plugin reads and
  writes, stated by ckspace (``ckspace build`` generates its C++ reader with flatc);
* ``ckspace_hipdnn_api.h`` — hipDNN's plugin C ABI as the plugin implements it;
* ``ckspace_hipdnn_plugin.cpp`` — the plugin over the dispatcher's C API: one engine per
  convolution direction of the library, applicability through ``ckspace_select`` (the problem
  rules every ckspace caller uses), a knob pinning a kernel, execution through ``ckspace_run``.

``ckspace build`` links it with the kernels into ``libckspace_hipdnn_<arch>.so``
(:mod:`ckspace.compiling.plugin_build`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import jinja2

from ckspace import __version__
from ckspace.core.vocab import Dtype, Variant
from ckspace.emit.dispatcher import ESTIMATES, STATUSES, tensor_of_operand
from ckspace.emit.manifest import plugin_library_name, plugin_name

SCHEMA = "ckspace_hipdnn.fbs"
API_HEADER = "ckspace_hipdnn_api.h"
SOURCE = "ckspace_hipdnn_plugin.cpp"
READER_HEADER = "ckspace_hipdnn_generated.h"
"""What flatc names the reader it generates from :data:`SCHEMA`."""

ENGINE_API_VERSION = "1.0.0"
"""The hipDNN engine plugin API version the plugin implements; hipDNN drops a plugin of another
major version."""
WIRE_NAMESPACE = "ckspace_hipdnn_wire"
"""The FlatBuffers namespace of :data:`SCHEMA` (its own, so that the generated reader cannot meet
hipDNN's own generated classes in one process)."""
KNOB = "ckspace.kernel"
"""The id of the engines' knob, which pins a kernel of the library by name (dotted as hipDNN's own
knob ids are: ``global.deterministic``)."""
KNOB_AUTO = "auto"
KNOB_K_BATCH = "ckspace.k_batch"
"""The weight-gradient engine's split-K knob (the problem's ``k_batch``), 1 by default."""
SPLIT_K_CHOICES = (1, 2, 4, 8, 16, 32, 64, 128)
"""The split-K factors an engine's details offer (those some kernel can run the graph with); a
config may ask for any factor."""
GLOBAL_KNOBS = "global."
"""The start of the ids of hipDNN's own knobs, which an engine config may set for any engine."""
KNOB_WORKSPACE_LIMIT = "global.workspace_size_limit"
"""hipDNN's cap on an engine's workspace in bytes: a pick that needs more is not applicable."""
KNOB_DETERMINISTIC = "global.deterministic"
"""hipDNN's request for bitwise-reproducible runs: every unsplit run is; a split one is declined."""

WIRE_DTYPES: dict[Dtype, str] = {Dtype.FP32: "FLOAT", Dtype.FP16: "HALF", Dtype.BF16: "BFLOAT16"}
"""hipDNN's ``DataType`` of each ckspace dtype."""

_DIRECTION = {Variant.FORWARD: "FWD", Variant.BWD_DATA: "BWD_DATA", Variant.BWD_WEIGHT: "BWD_WEIGHT"}


def fnv1a64(text: str) -> int:
    """The 64-bit FNV-1a hash of ``text``'s UTF-8 bytes, as a signed int64: hipDNN requires an
    engine's id to equal this hash of its name (and drops an engine whose id does not)."""
    value = 0xCBF29CE484222325
    for byte in text.encode():
        value = ((value ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return int.from_bytes(value.to_bytes(8, "little"), "little", signed=True)


@dataclass(frozen=True)
class Engine:
    """One engine of the plugin: a convolution direction of the library."""

    name: str
    variant: Variant
    arch: str = ""

    @property
    def id(self) -> int:
        return fnv1a64(self.name)


def engines(arch: str, variants: Sequence[Variant]) -> list[Engine]:
    """The engines of a library of ``variants`` for ``arch``: the arch is in each name, so that
    plugins of two archs in one process keep apart (hipDNN drops an engine whose id an earlier
    plugin already provides)."""
    return [Engine(f"CKSPACE_{arch.upper()}_CONV_{_DIRECTION[v]}", v, arch) for v in Variant if v in variants]


def fleet_engines(archs: Mapping[str, Sequence[Variant]]) -> list[Engine]:
    """The engines of a plugin over a library of several archs (``archs``: each arch's directions):
    each arch's own, as its one-arch plugin names them. An engine's id is its name's hash, so
    adding or removing an arch leaves the other archs' engine ids as they were (a rule file or a
    cache keyed by engine id stays valid), and a one-arch plugin of an arch the fleet's holds
    offers the same ids: hipDNN keeps the first plugin it loads of two that offer one id, so load
    one or the other for an arch, not both."""
    return [e for arch in sorted(archs) for e in engines(arch, archs[arch])]


def plugin_sources(
    arch: str,
    variants: Sequence[Variant],
    dtypes: Sequence[Dtype],
    environment: jinja2.Environment,
    fleet: Mapping[str, Sequence[Variant]] | None = None,
) -> dict[str, bytes]:
    """The plugin's files (path in the tree -> bytes) for a library of ``variants`` and ``dtypes``
    (``fleet``: a library of several archs, each arch's directions; ``arch`` is then their label)."""
    served = [d for d in Dtype if d in dtypes]
    listed = fleet_engines(fleet) if fleet else engines(arch, variants)
    context = {
        "version": __version__,
        "api_version": ENGINE_API_VERSION,
        "arch": arch,
        "plugin_name": plugin_name(arch),
        "library": plugin_library_name(arch),
        "wire_namespace": WIRE_NAMESPACE,
        "knob": KNOB,
        "knob_auto": KNOB_AUTO,
        "global_knobs": GLOBAL_KNOBS,
        "knob_workspace_limit": KNOB_WORKSPACE_LIMIT,
        "knob_deterministic": KNOB_DETERMINISTIC,
        "knob_k_batch": KNOB_K_BATCH,
        "split_k_choices": SPLIT_K_CHOICES,
        "engines": [
            {
                "name": e.name,
                "id_hex": f"0x{e.id & 0xFFFFFFFFFFFFFFFF:016x}",
                "variant_macro": f"CKSPACE_{e.variant.value.upper()}",
                "arch": e.arch,
            }
            for e in listed
        ],
        "fleet": sorted(fleet) if fleet else [],
        "written": [row[2] for row in tensor_of_operand()],
        "statuses": [s for s in STATUSES if fleet or not s.fleet],
        "estimates": ESTIMATES,
        "dtypes": [(WIRE_DTYPES[d], f"CKSPACE_DTYPE_{d.value.upper()}") for d in served],
        "dtype_names": ", ".join(WIRE_DTYPES[d] for d in served),
    }
    return {
        SCHEMA: environment.get_template("ckspace_hipdnn.fbs.j2").render(context).encode(),
        API_HEADER: environment.get_template("ckspace_hipdnn_api.h.j2").render(context).encode(),
        SOURCE: environment.get_template("ckspace_hipdnn_plugin.cpp.j2").render(context).encode(),
    }
