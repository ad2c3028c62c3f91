#!/usr/bin/env bash
# Install SimGrid's Python bindings into the active Python environment (optional: only the
# peer benchmark benchmarks/vs_simgrid.py needs them; netsim and its tests never do).
#
# Usage:  . .venv/bin/activate && bash benchmarks/install_simgrid.sh      (~12 min on 2 cores)
#
# Why each step:
# - PyPI ships SimGrid 4.1 as an sdist only, so pip compiles the C++ library: g++, cmake and the
#   Boost headers must be present (installed with apt-get when run as root).
# - pybind11 3.x does not compile SimGrid 4.1's bindings, so pybind11 is pinned to 2.13.6 and the
#   build runs with --no-build-isolation (an isolated build would fetch the newest pybind11).
# - The extension module is linked against libsimgrid.so without an RPATH pointing beside
#   itself; patchelf adds $ORIGIN so `import simgrid` finds the library without LD_LIBRARY_PATH.
set -euo pipefail

SIMGRID_VERSION="${SIMGRID_VERSION:-4.1}"
PYTHON="${PYTHON:-python}"

if "$PYTHON" -c "import simgrid" 2>/dev/null; then
  echo "simgrid already importable: $("$PYTHON" -c 'import simgrid; print(simgrid.__file__)')"
  exit 0
fi

need_apt=()
command -v g++ >/dev/null || need_apt+=(g++)
command -v cmake >/dev/null || need_apt+=(cmake)
command -v patchelf >/dev/null || need_apt+=(patchelf)
[ -e /usr/include/boost/version.hpp ] || need_apt+=(libboost-dev)
if [ "${#need_apt[@]}" -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "missing system packages: ${need_apt[*]} (install them as root, then rerun)" >&2
    exit 1
  fi
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need_apt[@]}"
fi

"$PYTHON" -m pip install "pybind11==2.13.6" setuptools wheel
"$PYTHON" -m pip install -v --no-build-isolation --no-binary simgrid "simgrid==${SIMGRID_VERSION}"

# Give the extension an RPATH to the libsimgrid.so installed beside it.
site="$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')"
ext="$(ls "$site"/simgrid*.so 2>/dev/null | head -n 1 || true)"
if [ -z "$ext" ]; then
  echo "no simgrid extension module found in $site" >&2
  exit 1
fi
if ! ls "$site"/libsimgrid.so* >/dev/null 2>&1; then
  echo "libsimgrid.so was not installed beside $ext" >&2
  exit 1
fi
patchelf --set-rpath '$ORIGIN' "$ext"
"$PYTHON" -c "import simgrid; print('simgrid', simgrid.__file__, 'OK')"
