#!/usr/bin/env bash
# check_install_python.sh BUILD_DIR PYTHON: `cmake --install` into a fresh prefix puts the
# Python modules in PREFIX/LIBDIR/python, and with only that folder on PYTHONPATH (no
# CGEMM_LIBRARY, no source tree) `import cgemm` loads the installed libcgemm.so.0 and answers
# its version; cgemm_torch.py is installed beside it.
set -u
build=$1 python=$2
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cmake --install "$build" --prefix "$prefix" >"$prefix/install.log" 2>&1 ||
  { cat "$prefix/install.log"; fail "cmake --install failed"; }
pydir=$(dirname "$(find "$prefix" -name cgemm.py -path '*/python/*' | head -n 1)")
[ -f "$pydir/cgemm.py" ] || fail "no cgemm.py under $prefix"
[ -f "$pydir/cgemm_torch.py" ] || fail "no cgemm_torch.py beside $pydir/cgemm.py"
[ -e "$(dirname "$pydir")/libcgemm.so.0" ] || fail "libcgemm.so.0 is not beside $pydir"
# A build with the JAX plugin installs it beside libcgemm.so.0, and its module beside cgemm.py
# (cgemm_jax.py finds the library there).
if [ -e "$build/lib/libcgemm_jax.so" ]; then
  [ -e "$(dirname "$pydir")/libcgemm_jax.so" ] || fail "libcgemm_jax.so is not beside $pydir"
  [ -f "$pydir/cgemm_jax.py" ] || fail "no cgemm_jax.py beside $pydir/cgemm.py"
fi
cd "$prefix" || exit 1
out=$(env -u CGEMM_LIBRARY PYTHONPATH="$pydir" "$python" -c '
import cgemm
print(cgemm.__file__)
print(cgemm._library_path())
print(cgemm.version())') || fail "import cgemm from $pydir failed: $out"
echo "$out"
case $out in
  "$pydir/cgemm.py"*"$(dirname "$pydir")/libcgemm.so.0"*) ;;
  *) fail "the module or its library is not the installed one" ;;
esac
echo PASS
