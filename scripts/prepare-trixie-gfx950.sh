#!/usr/bin/env bash
# Prepare a Debian trixie chroot with clang-22 (the first Debian clang that knows gfx950) and the
# HIP headers/device libraries, and a compiler wrapper usable as CKSPACE_CXX (README: "Emitting and building kernels").
# Needs root and debootstrap (apt-get install debootstrap). About 1.4 GB.
#
# Usage: prepare-trixie-gfx950.sh [CHROOT] [BIND_DIR ...]
#   CHROOT    default /opt/ckspace-trixie
#   BIND_DIR  folders bind-mounted at the same path inside (default: /work /tmp /opt/ckspace-toolchain)
# Result: CHROOT/env.sh exporting CKSPACE_CXX (the wrapper), CKSPACE_DEVICE_LIBS, CKSPACE_HIP_FLAGS.
set -euo pipefail
ROOT="${1:-/opt/ckspace-trixie}"
shift || true
BINDS=("$@")
[ "${#BINDS[@]}" -gt 0 ] || BINDS=(/work /tmp /opt/ckspace-toolchain)
[ "$(id -u)" -eq 0 ] || { echo "needs root (chroot, mount)" >&2; exit 1; }
command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap >/dev/null; }

if [ ! -x "$ROOT/usr/bin/clang++-22" ]; then
    if [ ! -x "$ROOT/usr/bin/apt-get" ]; then
        debootstrap --variant=minbase trixie "$ROOT" >/dev/null
    fi
    chroot "$ROOT" /usr/bin/env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    chroot "$ROOT" /usr/bin/env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        clang-22 lld-22 llvm-22 clang-tools-22 libclang-rt-22-dev libamdhip64-dev rocm-device-libs-17 >/dev/null
fi

for dir in "${BINDS[@]}"; do
    mkdir -p "$ROOT$dir"
    mountpoint -q "$ROOT$dir" || mount --bind "$dir" "$ROOT$dir"
done

# Device libraries: the packaged bitcode plus the gfx950 ISA-version file rocm-device-libs-17 lacks.
src="$(chroot "$ROOT" sh -c 'dirname "$(find /usr/lib -name ockl.bc | head -n1)"')"
[ -n "$src" ] && [ "$src" != "." ] || { echo "no ROCm device libraries (ockl.bc) in the chroot" >&2; exit 1; }
libs=/ckspace-devlibs
mkdir -p "$ROOT$libs"
for f in "$ROOT$src"/*.bc; do ln -sf "$src/$(basename "$f")" "$ROOT$libs/"; done
if [ ! -f "$ROOT$libs/oclc_isa_version_950.bc" ]; then
    cat > "$ROOT$libs/oclc_isa_version_950.ll" <<'LL'
target triple = "amdgcn-amd-amdhsa"
@__oclc_ISA_version = linkonce_odr protected local_unnamed_addr addrspace(4) constant i32 9050, align 4
LL
    chroot "$ROOT" llvm-as-22 "$libs/oclc_isa_version_950.ll" -o "$libs/oclc_isa_version_950.bc"
    rm "$ROOT$libs/oclc_isa_version_950.ll"
fi

mkdir -p "$ROOT/ckspace-bin"
cat > "$ROOT/ckspace-bin/clang++-22" <<WRAP
#!/bin/sh
# Runs trixie's clang++-22 inside $ROOT in the caller's working directory (paths are bind-mounted).
exec chroot "$ROOT" /bin/sh -c 'cd "\$0" && exec /usr/bin/clang++-22 "\$@"' "\$PWD" "\$@"
WRAP
chmod +x "$ROOT/ckspace-bin/clang++-22"

cat > "$ROOT/env.sh" <<ENV
export CKSPACE_CXX=$ROOT/ckspace-bin/clang++-22
export CKSPACE_DEVICE_LIBS=$libs
export CKSPACE_HIP_FLAGS="-mcode-object-version=5 -D__AMDGCN_WAVEFRONT_SIZE=64"
ENV
echo "gfx950 toolchain ready: . $ROOT/env.sh"
