//! Tool-name normalization, shared by filters (at compile time, through the
//! macros) and by the runtime (for every tool and every model-named call),
//! and the checks that keep a look-alike name from slipping past a filter.

use std::fmt;

use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;
use unicode_security::general_security_profile::IdentifierType;
use unicode_security::{GeneralSecurityProfile, MixedScript, skeleton};

/// Normalizes a tool name the way filters and `ToolCallHookContext::tool_name`
/// use it.
///
/// The steps: fold to ASCII, split camelCase, acronyms included
/// (`WebSearch` → `Web_Search`, `HTTPRequest` → `HTTP_Request`), lowercase,
/// replace every run of characters other than letters and digits with one
/// `_`, and strip leading and trailing `_`.
///
/// Folding never shortens a name silently. Compatibility forms fold
/// (`ｆｉｌｅ` → `file`), accents come off (`é` → `e`), invisible
/// characters (soft hyphen, zero-width space and joiner, bidirectional
/// controls) carry no letter and vanish, and a letter that only *looks*
/// like an ASCII one (Cyrillic `е`, Greek `ο`) becomes that ASCII letter:
/// its prototype in Unicode's confusables table (UTS #39), so a name that
/// reads `delete_file` is `delete_file` and a filter on it matches. When a
/// name has a letter or digit with no ASCII look-alike (`straße`, `поиск`,
/// `搜索`), nothing is mapped: the name keeps its own letters, lowercased.
/// A crew refuses tools whose names are invisible-character tricks or mix
/// scripts that way (see [`check_tool_name`]).
///
/// Names that are already normalized ASCII (the usual case) are copied
/// without any other work; other ASCII names take one pass over the bytes.
///
/// ```
/// use hooks_core::normalize_tool_name;
/// assert_eq!(normalize_tool_name("Web Search"), "web_search");
/// assert_eq!(normalize_tool_name("WebSearch"), "web_search");
/// assert_eq!(normalize_tool_name("web-search"), "web_search");
/// assert_eq!(normalize_tool_name("__Café  Menu__"), "cafe_menu");
/// assert_eq!(normalize_tool_name("HTTPRequest"), "http_request");
/// // A Cyrillic `е` reads as `e`: the name is the one it imitates.
/// assert_eq!(normalize_tool_name("d\u{0435}lete_file"), "delete_file");
/// // A letter with no ASCII look-alike is kept, never dropped.
/// assert_eq!(normalize_tool_name("Straße"), "straße");
/// ```
pub fn normalize_tool_name(name: &str) -> String {
    if is_normalized_tool_name(name) {
        return name.to_owned();
    }
    if name.is_ascii() {
        return normalize_ascii(name.as_bytes());
    }
    match fold_to_ascii(name) {
        Some(folded) => normalize_ascii(folded.as_bytes()),
        None => normalize_unicode(name),
    }
}

/// The camelCase split, lowercasing and separator runs, on ASCII bytes.
fn normalize_ascii(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() + 4);
    let mut separator_pending = false;
    for (i, &b) in bytes.iter().enumerate() {
        if !b.is_ascii_alphanumeric() {
            separator_pending = true;
            continue;
        }
        if b.is_ascii_uppercase() && i > 0 {
            let previous = bytes[i - 1];
            let next_is_lower = bytes.get(i + 1).is_some_and(u8::is_ascii_lowercase);
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
        out.push(char::from(b.to_ascii_lowercase()));
    }
    out
}

/// Whether `c` is one of Unicode's default-ignorable code points (soft
/// hyphen, zero-width characters, bidirectional controls, variation
/// selectors, tags...): rendered as nothing, or not at all.
fn is_invisible(c: char) -> bool {
    c.identifier_type() == Some(IdentifierType::Default_Ignorable)
}

/// The ASCII text `c` is a look-alike of (its UTS #39 prototype, marks
/// aside), if that is ASCII. A capital prefers its small letter's
/// prototype, capitalized (Cyrillic `І` reads `I`, whose own prototype
/// is `l`); the prototype `rn` is the one of `m`.
fn ascii_prototype(c: char, out: &mut String) -> bool {
    let prototype = |c: char| -> Option<String> {
        let mut buffer = [0; 4];
        let text: String = skeleton(c.encode_utf8(&mut buffer))
            .filter(|p| !is_combining_mark(*p))
            .collect();
        (!text.is_empty() && text.is_ascii()).then_some(text)
    };
    if c.is_uppercase() {
        let mut lower = c.to_lowercase();
        if let (Some(small), None) = (lower.next(), lower.next())
            && let Some(text) = prototype(small).filter(|t| t.len() == 1)
        {
            out.push_str(&text.to_ascii_uppercase());
            return true;
        }
    }
    match prototype(c) {
        Some(text) if text == "rn" => out.push('m'),
        Some(text) => out.push_str(&text),
        None => return false,
    }
    true
}

/// `name` in ASCII, when every letter and digit in it has an ASCII form
/// (itself, its compatibility decomposition, or its look-alike); `None`
/// when one has none. Other characters with no ASCII form separate words.
fn fold_to_ascii(name: &str) -> Option<String> {
    let mut out = String::with_capacity(name.len());
    for c in name.nfkd() {
        if c.is_ascii() {
            out.push(c);
        } else if is_invisible(c) || is_combining_mark(c) {
            // No letter: invisible, or an accent on the letter before.
        } else if !ascii_prototype(c, &mut out) {
            if c.is_alphanumeric() {
                return None;
            }
            out.push(' ');
        }
    }
    Some(out)
}

/// The normalization of a name that keeps letters with no ASCII form:
/// compatibility forms folded, accents on ASCII letters dropped, invisible
/// characters dropped, words split and lowercased, every other run of
/// non-letters one `_`.
fn normalize_unicode(name: &str) -> String {
    let mut chars: Vec<char> = Vec::with_capacity(name.len());
    for c in name.nfkd() {
        if is_invisible(c) {
            continue;
        }
        if is_combining_mark(c) && chars.last().is_none_or(char::is_ascii) {
            continue;
        }
        chars.push(c);
    }
    let is_word = |c: char| c.is_alphanumeric() || is_combining_mark(c);
    let mut out = String::with_capacity(name.len() + 4);
    let mut separator_pending = false;
    for (i, &c) in chars.iter().enumerate() {
        if !is_word(c) {
            separator_pending = true;
            continue;
        }
        if c.is_uppercase() && i > 0 {
            let previous = chars[i - 1];
            let next_is_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            if previous.is_lowercase()
                || previous.is_numeric()
                || (previous.is_uppercase() && next_is_lower)
            {
                separator_pending = true;
            }
        }
        if separator_pending && !out.is_empty() {
            out.push('_');
        }
        separator_pending = false;
        out.extend(c.to_lowercase());
    }
    out.nfc().collect()
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
///
/// ```
/// use hooks_core::{is_normalized_tool_name, normalize_tool_name};
///
/// assert!(is_normalized_tool_name("web_search"));
/// assert!(!is_normalized_tool_name("WebSearch"));
/// assert!(!is_normalized_tool_name("web__search"));
/// assert!(is_normalized_tool_name(&normalize_tool_name("WebSearch")));
/// ```
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

/// Why a tool name cannot be trusted to mean what it shows: see
/// [`check_tool_name`].
///
/// ```
/// use hooks_core::{check_tool_name, ToolNameProblem};
///
/// // A zero-width space hides inside a name that reads `delete_file`.
/// let problem = check_tool_name("delete\u{200B}_file").unwrap_err();
/// match problem {
///     ToolNameProblem::Invisible { character } => assert_eq!(character, '\u{200B}'),
///     other => panic!("unexpected: {other}"),
/// }
/// assert!(problem.to_string().contains("invisible character"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolNameProblem {
    /// An invisible character (soft hyphen, zero-width space or joiner,
    /// a variation selector...): the name does not read as it is written.
    #[error(
        "it contains {}, an invisible character, so it does not read as it is written",
        CodePoint(*character)
    )]
    Invisible {
        /// The character.
        character: char,
    },
    /// A bidirectional control (such as the right-to-left override
    /// U+202E): the name is shown in another order than it is read.
    #[error(
        "it contains {}, a bidirectional control, so it is shown in another order than it is \
         read",
        CodePoint(*character)
    )]
    BidiControl {
        /// The character.
        character: char,
    },
    /// A control character (the escape of a terminal sequence, say).
    #[error(
        "it contains the control character {}, which can rewrite what a terminal shows",
        CodePoint(*character)
    )]
    Control {
        /// The character.
        character: char,
    },
    /// A letter of another script than the rest of the name, with no
    /// ASCII look-alike to read it as.
    #[error(
        "it mixes scripts: {} is not of the script of the letters before it and has no ASCII \
         look-alike to read it as",
        CodePoint(*character)
    )]
    MixedScripts {
        /// The first letter of another script.
        character: char,
    },
}

/// A character shown as itself and its code point (`'е' (U+0435)`), or
/// by code point alone when it would not show.
struct CodePoint(char);

impl fmt::Display for CodePoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = self.0;
        if c.is_control() || is_invisible(c) || is_combining_mark(c) {
            write!(f, "U+{:04X}", u32::from(c))
        } else {
            write!(f, "'{c}' (U+{:04X})", u32::from(c))
        }
    }
}

/// The Unicode Bidi_Control characters: marks, embeddings, overrides and
/// isolates.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// Checks a tool name as its source spelled it (before normalization):
/// `Err` when it contains a control, invisible or bidirectional-control
/// character, or when, once normalized, it mixes scripts (a letter of
/// another script with no ASCII look-alike, as in `delete_фile`). A crew
/// refuses to build with such a tool: a hook filter could not be trusted
/// to catch it.
///
/// Look-alikes of ASCII letters are no problem here: normalization reads
/// them as the letters they imitate (see [`normalize_tool_name`]).
///
/// ```
/// use hooks_core::{ToolNameProblem, check_tool_name};
/// assert_eq!(check_tool_name("delete_file"), Ok(()));
/// assert_eq!(check_tool_name("d\u{0435}lete_file"), Ok(())); // reads `delete_file`
/// assert_eq!(check_tool_name("поиск"), Ok(())); // one script
/// assert_eq!(
///     check_tool_name("dele\u{200B}te_file"),
///     Err(ToolNameProblem::Invisible { character: '\u{200B}' })
/// );
/// assert_eq!(
///     check_tool_name("\u{202E}elif_eteled"),
///     Err(ToolNameProblem::BidiControl { character: '\u{202E}' })
/// );
/// assert_eq!(
///     check_tool_name("delete_\u{0444}ile"),
///     Err(ToolNameProblem::MixedScripts { character: '\u{0444}' })
/// );
/// ```
pub fn check_tool_name(spelled: &str) -> Result<(), ToolNameProblem> {
    if let Some(character) = spelled.chars().find(|c| c.is_control()) {
        return Err(ToolNameProblem::Control { character });
    }
    if let Some(character) = spelled.chars().find(|c| is_bidi_control(*c)) {
        return Err(ToolNameProblem::BidiControl { character });
    }
    if let Some(character) = spelled.chars().find(|c| is_invisible(*c)) {
        return Err(ToolNameProblem::Invisible { character });
    }
    let normalized = normalize_tool_name(spelled);
    if normalized.is_ascii() || normalized.as_str().is_single_script() {
        return Ok(());
    }
    // The first letter after which the name stops being of one script.
    let mut end = 0;
    for c in normalized.chars() {
        end += c.len_utf8();
        if !normalized[..end].is_single_script() {
            return Err(ToolNameProblem::MixedScripts { character: c });
        }
    }
    Ok(())
}

/// What a tool name looks like, for telling look-alike names apart: the
/// normalized UTS #39 skeleton of the name as spelled and of its capitals.
/// Two names look alike when they share one ([`ToolNameSkeleton::looks_like`]).
///
/// The skeleton maps every character to the prototype of the characters
/// it can be mistaken for (`1`, `I` and `|` → `l`, `0` → `O`, `m` →
/// `rn`, Cyrillic `е` → `e`) and drops invisible characters. It is
/// computed on the name as its source spelled it, since normalization
/// lowercases (and an `I` that reads `l` only does so as a capital).
///
/// ```
/// use hooks_core::ToolNameSkeleton;
/// let filtered = ToolNameSkeleton::of("delete_file");
/// assert!(ToolNameSkeleton::of("de1ete_file").looks_like(&filtered));
/// assert!(ToolNameSkeleton::of("delete_fiIe").looks_like(&filtered));
/// assert!(ToolNameSkeleton::of("de|ete_file").looks_like(&filtered));
/// assert!(ToolNameSkeleton::of("DELETE_F1LE").looks_like(&filtered));
/// assert!(!ToolNameSkeleton::of("delete_files").looks_like(&filtered));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ToolNameSkeleton {
    as_spelled: String,
    in_capitals: String,
}

impl ToolNameSkeleton {
    /// The skeleton of `name` (a tool name as spelled, or a filter entry).
    pub fn of(name: &str) -> ToolNameSkeleton {
        let as_spelled = normalize_tool_name(&skeleton(name).collect::<String>());
        let capitals = name.to_uppercase();
        // Lowercased before it is normalized: a capital turned into `l`
        // must not split a word as camelCase would.
        let in_capitals =
            normalize_tool_name(&skeleton(&capitals).collect::<String>().to_lowercase());
        ToolNameSkeleton {
            as_spelled,
            in_capitals,
        }
    }

    /// Whether the two names can be mistaken for each other.
    pub fn looks_like(&self, other: &ToolNameSkeleton) -> bool {
        let some = |s: &String| !s.is_empty();
        (some(&self.as_spelled) && self.as_spelled == other.as_spelled)
            || (some(&self.in_capitals) && self.in_capitals == other.in_capitals)
    }
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
    fn look_alike_letters_read_as_the_ascii_letters_they_imitate() {
        for spelled in [
            "d\u{0435}lete_file",        // Cyrillic е
            "delet\u{0435}_fil\u{0435}", // two of them
            "d\u{0435}l\u{0435}t\u{0435}_fil\u{0435}",
            "del\u{0435}te_f\u{0456}le", // Cyrillic і
            "de\u{04CF}ete_file",        // Cyrillic palochka for l
            "delete_fi\u{217C}e",        // small roman numeral fifty
            "d\u{0435}lete_\u{0192}ile", // ƒ: its prototype is f
            "\u{FF44}\u{FF45}\u{FF4C}\u{FF45}\u{FF54}\u{FF45}_file", // fullwidth
            "\u{1D41D}elete_file",       // mathematical bold d
            "de\u{0301}lete_file",       // a combining accent
            "DELETE_F\u{0406}LE",        // Cyrillic capital І reads I
            "del\u{03B5}te_file",        // Greek ε... if it maps
        ] {
            let normalized = normalize_tool_name(spelled);
            if spelled.contains('\u{03B5}') {
                // Greek epsilon has no ASCII prototype: kept, not dropped.
                assert_eq!(normalized, "del\u{03B5}te_file", "{spelled:?}");
            } else {
                assert_eq!(normalized, "delete_file", "{spelled:?}");
            }
        }
        // Whole names in another script that only look Latin.
        assert_eq!(
            normalize_tool_name("\u{0455}\u{0441}\u{043E}\u{0440}\u{0435}"),
            "scope"
        );
        assert_eq!(normalize_tool_name("\u{03BF}pen"), "open"); // Greek ο
    }

    #[test]
    fn letters_with_no_ascii_form_are_kept_not_dropped() {
        assert_eq!(normalize_tool_name("Straße"), "straße");
        assert_eq!(normalize_tool_name("поиск"), "поиск");
        assert_eq!(normalize_tool_name("ПоискФайла"), "поиск_файла");
        assert_eq!(normalize_tool_name("搜索 工具"), "搜索_工具");
        assert_eq!(
            normalize_tool_name("delete_\u{0444}ile"),
            "delete_\u{0444}ile"
        );
        // Accents on Latin letters still come off next to kept letters.
        assert_eq!(normalize_tool_name("Café поиск"), "cafe_поиск");
        // Symbols with no ASCII form separate words.
        assert_eq!(normalize_tool_name("web\u{2605}search"), "web_search");
    }

    #[test]
    fn invisible_characters_carry_no_letter() {
        for spelled in [
            "dele\u{00AD}te_file",
            "delete\u{200B}_file",
            "del\u{200D}ete_file",
            "delete_file\u{FEFF}",
            "\u{2066}delete_file\u{2069}",
        ] {
            assert_eq!(normalize_tool_name(spelled), "delete_file", "{spelled:?}");
        }
    }

    #[test]
    fn normalizing_twice_changes_nothing() {
        for spelled in [
            "Straße",
            "ПоискФайла",
            "d\u{0435}lete_file",
            "Café поиск",
            "İstanbul поиск",
            "e\u{0301}\u{0444}",
            "\u{0444}\u{0301}x",
            "搜索 工具",
            "HTTPRequest",
        ] {
            let once = normalize_tool_name(spelled);
            assert_eq!(normalize_tool_name(&once), once, "{spelled:?}");
        }
    }

    #[test]
    fn names_that_hide_or_mix_scripts_are_problems() {
        assert_eq!(check_tool_name("web_search"), Ok(()));
        assert_eq!(check_tool_name("d\u{0435}lete_file"), Ok(()));
        assert_eq!(check_tool_name("ПоискФайла"), Ok(()));
        assert_eq!(check_tool_name("Straße"), Ok(()));
        assert_eq!(
            check_tool_name("\u{1b}[31mdelete_file\u{1b}[0m"),
            Err(ToolNameProblem::Control {
                character: '\u{1b}'
            })
        );
        assert_eq!(
            check_tool_name("dele\u{00AD}te_file"),
            Err(ToolNameProblem::Invisible {
                character: '\u{00AD}'
            })
        );
        assert_eq!(
            check_tool_name("\u{202D}delete_file"),
            Err(ToolNameProblem::BidiControl {
                character: '\u{202D}'
            })
        );
        assert_eq!(
            check_tool_name("d\u{0435}lete_\u{0444}ile"),
            Err(ToolNameProblem::MixedScripts {
                character: '\u{0435}'
            })
        );
        let message = ToolNameProblem::MixedScripts {
            character: '\u{0444}',
        }
        .to_string();
        assert!(message.contains("'\u{0444}' (U+0444)"), "{message}");
        let message = ToolNameProblem::Invisible {
            character: '\u{200B}',
        }
        .to_string();
        assert!(
            message.contains("U+200B") && !message.contains('\u{200B}'),
            "{message}"
        );
    }

    #[test]
    fn skeletons_catch_ascii_digit_and_letter_swaps() {
        let filtered = ToolNameSkeleton::of("delete_file");
        for spoof in [
            "de1ete_file",
            "delete_fiIe",
            "de|ete_file",
            "DELETE_F1LE",
            "de1eteFile",
            "de1ete-file",
            "d\u{0435}lete_file",
        ] {
            assert!(
                ToolNameSkeleton::of(spoof).looks_like(&filtered),
                "{spoof:?}"
            );
        }
        for other in [
            "delete_files",
            "x_delete_file",
            "read_file",
            "deletefile",
            "",
        ] {
            assert!(
                !ToolNameSkeleton::of(other).looks_like(&filtered),
                "{other:?}"
            );
        }
        assert!(ToolNameSkeleton::of("rn_file").looks_like(&ToolNameSkeleton::of("m_file")));
        assert!(ToolNameSkeleton::of("get_v0").looks_like(&ToolNameSkeleton::of("get_vO")));
        assert!(!ToolNameSkeleton::of("").looks_like(&ToolNameSkeleton::of("")));
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
