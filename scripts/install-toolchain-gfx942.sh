#!/usr/bin/env bash
# Install, on Debian bookworm, a clang-19 HIP toolchain that compiles CK Tile kernels for gfx942,
# and the CK headers vendored in the amd-aiter wheel (README: "Emitting and building kernels").
#
# Usage: install-toolchain-gfx942.sh [PREFIX]     (default PREFIX: /opt/ckspace-toolchain)
# Result: PREFIX/ck/include (CK headers), PREFIX/devlibs (ROCm device bitcode incl. gfx942 ISA file),
#         PREFIX/env.sh (exports CKSPACE_CXX, CKSPACE_DEVICE_LIBS, CK_ROOT). Needs root for apt.
set -euo pipefail
PREFIX="${1:-/opt/ckspace-toolchain}"
AITER_VERSION="0.1.7.post2.dev18"
CK_MEMBER="aiter_meta/3rdparty/composable_kernel"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

# cmake and pkgconf: the tests link a consumer project against a built library as integrators do
packages=(clang-19 lld-19 llvm-19 clang-tools-19 libamdhip64-dev rocm-device-libs libhsa-runtime-dev unzip cmake pkgconf)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
$SUDO mkdir -p "$PREFIX"
$SUDO chown "$(id -u):$(id -g)" "$PREFIX"

# CK headers from the amd-aiter wheel (headers and the grouped-convolution example only).
if [ ! -f "$PREFIX/ck/include/ck_tile/ops/grouped_convolution.hpp" ]; then
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
    wheel="$(ls "${AITER_WHEEL_DIR:-/nonexistent}"/amd_aiter-"$AITER_VERSION"-*.whl 2>/dev/null | head -n1 || true)"
    if [ -z "$wheel" ]; then
        python3 -m pip download --quiet --no-deps --dest "$tmp" "amd-aiter==$AITER_VERSION"
        wheel="$(ls "$tmp"/amd_aiter-*.whl)"
    fi
    unzip -q "$wheel" "$CK_MEMBER/include/*" "$CK_MEMBER/example/ck_tile/20_grouped_convolution/*" -d "$tmp"
    rm -rf "$PREFIX/ck.new"
    mv "$tmp/$CK_MEMBER" "$PREFIX/ck.new"
    rm -rf "$PREFIX/ck"
    mv "$PREFIX/ck.new" "$PREFIX/ck"
fi

# Device libraries: the packaged bitcode plus the gfx942 ISA-version file rocm-device-libs 5.2 lacks.
src_libs="$(dirname "$(find /usr/lib /usr/share -name 'ockl.bc' 2>/dev/null | head -n1)")"
[ -n "$src_libs" ] && [ -f "$src_libs/ockl.bc" ] || { echo "ROCm device libraries (ockl.bc) not found" >&2; exit 1; }
mkdir -p "$PREFIX/devlibs"
for f in "$src_libs"/*.bc; do ln -sf "$f" "$PREFIX/devlibs/"; done
if [ ! -f "$PREFIX/devlibs/oclc_isa_version_942.bc" ]; then
    cat > "$PREFIX/devlibs/oclc_isa_version_942.ll" <<'LL'
target triple = "amdgcn-amd-amdhsa"
@__oclc_ISA_version = linkonce_odr protected local_unnamed_addr addrspace(4) constant i32 9042, align 4
LL
    llvm-as-19 "$PREFIX/devlibs/oclc_isa_version_942.ll" -o "$PREFIX/devlibs/oclc_isa_version_942.bc"
    rm "$PREFIX/devlibs/oclc_isa_version_942.ll"
fi

cat > "$PREFIX/env.sh" <<ENV
export CKSPACE_CXX=$(command -v clang++-19)
export CKSPACE_DEVICE_LIBS=$PREFIX/devlibs
export CK_ROOT=$PREFIX/ck
ENV
echo "toolchain ready: . $PREFIX/env.sh"
