# Sourced by the device scripts (device-check.sh, device-bench.sh, device-parts.sh) with $root
# set: puts .devbuild/lib on LD_LIBRARY_PATH. pack-device.sh compresses the largest library
# (the device tool carries 64 MiB), so the libraries are unpacked outside the tree first.
libs=/tmp/cgemm-device-lib
mkdir -p "$libs"
for f in "$root"/.devbuild/lib/*; do
  case $f in
    *.xz) xz -dc "$f" >"$libs/$(basename "$f" .xz)" ;;
    *) cp "$f" "$libs/" ;;
  esac
done
export LD_LIBRARY_PATH=$libs:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
