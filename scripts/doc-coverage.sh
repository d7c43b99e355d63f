#!/usr/bin/env bash
# How many of crew-runtime's documentation pages show an example: every
# item page rustdoc writes for the crate (structs, enums, traits, functions,
# constants, types, attributes, macros, modules; the engine's items that
# crew-runtime re-exports included), with every feature on, as docs.rs
# builds them. A page counts when it shows at least one code example.
# rustdoc's own coverage report (`--show-coverage`) needs a nightly
# toolchain; this reads the HTML that stable rustdoc writes.
#
#   scripts/doc-coverage.sh            # prints the count and the pages without one
#   scripts/doc-coverage.sh 90         # also fails below 90 %
set -euo pipefail
cd "$(dirname "$0")/.."
minimum="${1:-0}"
target="${CARGO_TARGET_DIR:-target}"
features="openai,anthropic,mcp,policy,store,inbox,audit,otel,durable,channels,budget,redis"
cargo doc -p crew-runtime --no-deps --features "$features" --quiet
root="$target/doc/crew_runtime"
total=0
with=0
missing=()
while IFS= read -r page; do
    # Pages of items re-exported elsewhere are redirects, not pages.
    if grep -q "Redirecting to" "$page"; then
        continue
    fi
    total=$((total + 1))
    if grep -q 'class="example-wrap' "$page"; then
        with=$((with + 1))
    else
        missing+=("${page#"$root"/}")
    fi
done < <(find "$root" -name '*.html' \
    | grep -E '/((struct|enum|trait|fn|macro|attr|constant|type|static|derive|union)\.[^/]*|index)\.html$' \
    | sort)
if [ "$total" -eq 0 ]; then
    echo "no documentation pages under $root" >&2
    exit 1
fi
percent=$((with * 100 / total))
for page in "${missing[@]}"; do
    echo "no example: $page"
done
echo "crew-runtime: $with of $total item pages show an example ($percent %)"
if [ "$percent" -lt "$minimum" ]; then
    echo "below the $minimum % required" >&2
    exit 1
fi
