# Sourced by the GPU-machine scripts (`source tools/gpu_deps.sh`): unpacks .deps-lite/deps.tar.xz
# (made here by tools/make_gpu_deps.sh, carried with the call) into /tmp/deps once and points CMake,
# pkg-config and the loader at it. Looks in the current directory, then one up (a helper's tree
# copied under the repository). Without the archive it does nothing: a machine with the packages
# installed needs none of this.
vela_deps_dir=""
for d in .deps-lite ../.deps-lite; do [ -f "$d/deps.tar.xz" ] && { vela_deps_dir="$d"; break; }; done
if [ -n "$vela_deps_dir" ]; then
  D=/tmp/deps
  if [ ! -f "$D/.unpacked" ]; then
    mkdir -p "$D" && tar -xJf "$vela_deps_dir/deps.tar.xz" -C "$D" && touch "$D/.unpacked"
  fi
  export CMAKE_PREFIX_PATH="$D/usr" PKG_CONFIG_SYSROOT_DIR="$D"
  export PKG_CONFIG_PATH="$D/usr/lib/x86_64-linux-gnu/pkgconfig:$D/usr/share/pkgconfig"
  export LD_LIBRARY_PATH="$D/usr/lib/x86_64-linux-gnu:$D/usr/lib/x86_64-linux-gnu/openblas-pthread:${LD_LIBRARY_PATH:-}"
fi
unset vela_deps_dir
