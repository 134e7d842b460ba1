#!/usr/bin/env bash
# Generates Python gRPC stubs for Bulwark's API from proto/ and third_party/ into <outdir>.
#
# Two pitfalls, handled here:
# - Debian's python3-grpc-tools bundles a protoc too old for proto3 `optional`: the stand-alone
#   `protoc` (protobuf-compiler, 3.21) with `grpc_python_plugin` (protobuf-compiler-grpc) is used.
# - The v1 protos live under platform/, which would become a Python package `platform` and lose
#   to the standard library's `platform` module (which grpc itself imports): the package is
#   renamed `platform_api` and the generated imports rewritten. The descriptors keep their
#   file names, so the stubs still speak the same wire API.
# Only third_party/google is generated (grpc/ would shadow the grpc package; use grpcio-reflection
# for reflection). The google/ directory is left a namespace package (no __init__.py), so the generated
# google.api / google.rpc modules sit beside the system's google.protobuf.
set -euo pipefail
out="${1:?usage: generate.sh <outdir>}"
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
plugin="$(command -v grpc_python_plugin || true)"
command -v protoc >/dev/null || { echo "protoc not found: apt-get install protobuf-compiler" >&2; exit 1; }
[ -n "$plugin" ] || { echo "grpc_python_plugin not found: apt-get install protobuf-compiler-grpc" >&2; exit 1; }
# The well-known types (google/protobuf/*.proto) do not come with Debian's protoc but with libprotobuf-dev.
wkt_include="${PROTOC_INCLUDE:-/usr/include}"
[ -f "$wkt_include/google/protobuf/descriptor.proto" ] || {
  echo "google/protobuf/descriptor.proto not found in $wkt_include: apt-get install libprotobuf-dev (or set PROTOC_INCLUDE)" >&2
  exit 1
}

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
cd "$root"
mapfile -t files < <(cd proto && find . -name '*.proto' | sed 's|^\./||' | sort)
mapfile -t third < <(cd third_party && find google -name '*.proto' | sort)
protoc -I proto -I third_party -I "$wkt_include" \
  --python_out="$stage" --grpc_python_out="$stage" --plugin=protoc-gen-grpc_python="$plugin" \
  "${files[@]}" "${third[@]}"

mv "$stage/platform" "$stage/platform_api"
# `from platform.x import y` / `import platform.x` in the generated modules → platform_api
find "$stage" -name '*.py' -print0 | xargs -0 sed -i -E \
  -e 's/^from platform\./from platform_api./' \
  -e 's/^import platform\./import platform_api./'
mkdir -p "$out"
cp -r "$stage"/. "$out"/
echo "Python stubs in $out (import e.g. chainguard.platform.iam.v2beta1.groups_pb2)"
