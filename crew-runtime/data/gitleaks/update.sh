#!/usr/bin/env bash
# Replaces gitleaks.toml, LICENSE and VERSION in this folder with those of a
# gitleaks release, e.g.:
#
#     crew-runtime/data/gitleaks/update.sh v8.30.1
#
# The toml is kept byte for byte as upstream ships it: SecretRedactor reads
# it as data, so a new release needs no code change. Afterwards run
#
#     cargo test -p crew-runtime --lib guards
#     cargo test -p crew-runtime --test redaction_corpus
#
# the first says whether more rules than before fail to compile with the
# `regex` crate (update the expected count and the list in the module's
# docs), the second whether the corpora still pass.
set -euo pipefail

if [[ $# -ne 1 || ! $1 =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
    echo "usage: $0 vMAJOR.MINOR.PATCH (a gitleaks release tag)" >&2
    exit 2
fi
tag=$1
repo=gitleaks/gitleaks
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fetch() {
    curl --fail --silent --show-error --location --retry 3 "$@"
}

# The commit the tag names (annotated or not), so VERSION pins what was read.
commit=$(fetch --header 'Accept: application/vnd.github.sha' \
    "https://api.github.com/repos/$repo/commits/$tag")
if [[ ! $commit =~ ^[0-9a-f]{40}$ ]]; then
    echo "could not resolve $tag to a commit (got: $commit)" >&2
    exit 1
fi

# Read both files at that commit, not at the tag, so the three agree even if
# the tag moves between the requests.
fetch --output "$work/gitleaks.toml" \
    "https://raw.githubusercontent.com/$repo/$commit/config/gitleaks.toml"
fetch --output "$work/LICENSE" \
    "https://raw.githubusercontent.com/$repo/$commit/LICENSE"

grep -q '^\[\[rules\]\]' "$work/gitleaks.toml" || {
    echo "$tag: config/gitleaks.toml has no [[rules]]" >&2
    exit 1
}
grep -q 'MIT License' "$work/LICENSE" || {
    echo "$tag: the license is no longer MIT; check it before using the rules" >&2
    exit 1
}

sha=$(sha256sum "$work/gitleaks.toml" | cut -d' ' -f1)
cat >"$work/VERSION" <<VERSION
# The gitleaks release these rules come from (update.sh rewrites this file).
tag=$tag
commit=$commit
source=https://github.com/$repo/blob/$tag/config/gitleaks.toml
sha256=$sha
VERSION

mv "$work/gitleaks.toml" "$work/LICENSE" "$work/VERSION" "$here/"
echo "gitleaks $tag ($commit) written to $here"
