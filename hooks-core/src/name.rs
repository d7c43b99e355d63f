//! Tool-name normalization, shared by filters (at compile time, through the
//! macros) and by the runtime (for every tool and every model-named call).

use unicode_normalization::UnicodeNormalization;

/// Normalizes a tool name the way filters and `ToolCallHookContext::tool_name`
/// use it.
///
/// The steps: fold to ASCII (compatibility decomposition, non-ASCII dropped),
/// split camelCase, acronyms included (`WebSearch` → `Web_Search`,
/// `HTTPRequest` → `HTTP_Request`), lowercase, replace every run
/// of characters other than `a-z`/`0-9` with one `_`, and strip leading and
/// trailing `_`.
///
/// ```
/// use hooks_core::normalize_tool_name;
/// assert_eq!(normalize_tool_name("Web Search"), "web_search");
/// assert_eq!(normalize_tool_name("WebSearch"), "web_search");
/// assert_eq!(normalize_tool_name("web-search"), "web_search");
/// assert_eq!(normalize_tool_name("__Café  Menu__"), "cafe_menu");
/// assert_eq!(normalize_tool_name("HTTPRequest"), "http_request");
/// ```
pub fn normalize_tool_name(name: &str) -> String {
    if is_normalized_tool_name(name) {
        return name.to_owned();
    }
    // Combining marks and letters with no ASCII form vanish, as an
    // ASCII-ignoring encode does.
    let chars: Vec<char> = name.nfkd().filter(char::is_ascii).collect();
    let mut out = String::with_capacity(chars.len() + 4);
    let mut separator_pending = false;
    for (i, &ch) in chars.iter().enumerate() {
        if !ch.is_ascii_alphanumeric() {
            separator_pending = true;
            continue;
        }
        if ch.is_ascii_uppercase() && i > 0 {
            let previous = chars[i - 1];
            let next_is_lower = chars.get(i + 1).is_some_and(char::is_ascii_lowercase);
            // `webSearch`, `file2Disk`: a capital after a lowercase letter
            // or digit starts a word; `HTTPRequest`: so does the last
            // capital of an acronym followed by a lowercase letter.
            if previous.is_ascii_lowercase()
                || previous.is_ascii_digit()
                || (previous.is_ascii_uppercase() && next_is_lower)
            {
                separator_pending = true;
            }
        }
        if separator_pending && !out.is_empty() {
            out.push('_');
        }
        separator_pending = false;
        out.push(ch.to_ascii_lowercase());
    }
    out
}

/// The hash a chain's tool index is keyed by, computed once per call so
/// that each chain of the call looks its tool up without hashing the name.
pub(crate) fn tool_key(name: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = rustc_hash::FxHasher::default();
    name.hash(&mut hasher);
    hasher.finish()
}

/// Whether `name` is already in normalized form (so normalizing it is the
/// identity). Cheap: one pass over the bytes, no allocation.
pub fn is_normalized_tool_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    if bytes.first() == Some(&b'_') || bytes.last() == Some(&b'_') {
        return false;
    }
    let mut previous_underscore = false;
    for &b in bytes {
        match b {
            b'a'..=b'z' | b'0'..=b'9' => previous_underscore = false,
            b'_' if !previous_underscore => previous_underscore = true,
            _ => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_names_are_normalized_like_tool_names() {
        for spelled in [
            "Web Search",
            "WebSearch",
            "web-search",
            "web_search",
            " web__search ",
        ] {
            assert_eq!(normalize_tool_name(spelled), "web_search", "{spelled:?}");
        }
        for spelled in [
            "HTTPRequest",
            "HttpRequest",
            "HTTP Request",
            "http_request",
            "httpRequest",
        ] {
            assert_eq!(normalize_tool_name(spelled), "http_request", "{spelled:?}");
        }
        assert_eq!(normalize_tool_name("getURL"), "get_url");
        assert_eq!(normalize_tool_name("JSONToXML"), "json_to_xml");
        assert_eq!(normalize_tool_name("readFile2Disk"), "read_file2_disk");
        assert_eq!(normalize_tool_name("Ünïcödé Tool"), "unicode_tool");
        assert_eq!(normalize_tool_name("!!!"), "");
        assert_eq!(normalize_tool_name(""), "");
    }

    #[test]
    fn normalized_check_agrees_with_normalize() {
        for name in [
            "a",
            "web_search",
            "_a",
            "a_",
            "a__b",
            "A",
            "a b",
            "",
            "x9_y",
        ] {
            assert_eq!(
                is_normalized_tool_name(name),
                normalize_tool_name(name) == name,
                "{name:?}"
            );
        }
    }
}
