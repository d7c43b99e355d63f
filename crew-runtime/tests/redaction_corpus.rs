//! `SecretRedactor` measured on two corpora (SPEC §8): real-world secret
//! shapes, none of which may survive, and ordinary text, which must come
//! back unchanged. The corpora are data files, one case a line, so a shape
//! is added without touching code; their format is described at the top of
//! each file.

use std::borrow::Cow;
use std::fmt::Write as _;

use crew_runtime::guards::SecretRedactor;

const SECRETS: &str = include_str!("data/secrets.txt");
const ORDINARY: &str = include_str!("data/ordinary.txt");

/// The most ordinary texts that may be changed, as a share of the corpus:
/// none (SPEC §8), so that each ordinary text is a test of its own.
const MAX_FALSE_POSITIVE_RATE: f64 = 0.0;

/// A secret counts as leaked when any run of this many of its characters
/// is still in the output (so a token cut short, or a key block with a
/// line left over, is a leak too).
const LEAK_WINDOW: usize = 8;

struct Case {
    label: String,
    text: String,
    secrets: Vec<String>,
    /// The text with every secret cut out: what may stay.
    context: String,
}

/// The cases of a corpus file: comments and blank lines skipped, escapes
/// resolved, `⟦…⟧` markers taken out and their contents kept as secrets.
fn cases(file: &str) -> Vec<Case> {
    file.lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .map(|line| {
            let (label, text) = line
                .split_once('\t')
                .unwrap_or_else(|| panic!("no tab between label and text: {line:?}"));
            let (text, secrets, context) = take_markers(&unescape_line(text));
            Case {
                label: label.to_owned(),
                text,
                secrets,
                context,
            }
        })
        .collect()
}

/// `\n`, `\t`, `\\` → line break, tab, backslash; any other backslash
/// stays as it is.
fn unescape_line(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(ch) = chars.next() {
        if ch != '\\' {
            out.push(ch);
            continue;
        }
        match chars.peek() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('\\') => out.push('\\'),
            _ => {
                out.push('\\');
                continue;
            }
        }
        chars.next();
    }
    out
}

/// The text without markers, the marked secrets, and the text with each
/// secret replaced by a NUL.
fn take_markers(text: &str) -> (String, Vec<String>, String) {
    let mut out = String::with_capacity(text.len());
    let mut context = String::with_capacity(text.len());
    let mut secrets = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('⟦') {
        out.push_str(&rest[..open]);
        context.push_str(&rest[..open]);
        let inner = &rest[open + '⟦'.len_utf8()..];
        let close = inner
            .find('⟧')
            .unwrap_or_else(|| panic!("unclosed ⟦ in {text:?}"));
        out.push_str(&inner[..close]);
        context.push('\0');
        secrets.push(inner[..close].to_owned());
        rest = &inner[close + '⟧'.len_utf8()..];
    }
    out.push_str(rest);
    context.push_str(rest);
    (out, secrets, context)
}

/// Decodes JSON escapes (`\uXXXX` with surrogate pairs, `\/`, `\"`, `\\`,
/// `\n`) wherever they are, so an escaped leftover is seen too.
fn json_unescaped(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut high: Option<u16> = None;
    while let Some(ch) = chars.next() {
        if ch != '\\' {
            out.push(ch);
            continue;
        }
        match chars.peek().copied() {
            Some('u') => {
                chars.next();
                let hex: String = chars.by_ref().take(4).collect();
                let Ok(unit) = u16::from_str_radix(&hex, 16) else {
                    out.push_str("\\u");
                    out.push_str(&hex);
                    continue;
                };
                match high.take() {
                    Some(first) => {
                        if let Some(Ok(c)) = char::decode_utf16([first, unit]).next() {
                            out.push(c);
                        }
                    }
                    None if (0xD800..0xDC00).contains(&unit) => high = Some(unit),
                    None => out.push(char::from_u32(u32::from(unit)).unwrap_or('?')),
                }
            }
            Some(c @ ('/' | '"' | '\\')) => {
                chars.next();
                out.push(c);
            }
            Some('n') => {
                chars.next();
                out.push('\n');
            }
            _ => out.push('\\'),
        }
    }
    out
}

/// The first run of `LEAK_WINDOW` characters of `secret` (or all of a
/// shorter one) still found in `output`, in either's raw or JSON-unescaped
/// form; runs that the text around the secret holds too (a key named like
/// the token's prefix: `CLOJARS_PASSWORD=CLOJARS_…`) prove nothing.
fn leftover(output: &str, secret: &str, context: &str) -> Option<String> {
    let outputs = [output.to_owned(), json_unescaped(output)];
    let contexts = [context.to_owned(), json_unescaped(context)];
    for form in [secret.to_owned(), json_unescaped(secret)] {
        let chars: Vec<char> = form.chars().collect();
        let width = LEAK_WINDOW.min(chars.len());
        for window in chars.windows(width) {
            let window: String = window.iter().collect();
            if outputs.iter().any(|output| output.contains(&window))
                && !contexts.iter().any(|context| context.contains(&window))
            {
                return Some(window);
            }
        }
    }
    None
}

#[test]
fn the_corpora_are_big_enough_and_well_formed() {
    let secrets = cases(SECRETS);
    let ordinary = cases(ORDINARY);
    assert!(secrets.len() >= 150, "{} secret shapes", secrets.len());
    assert!(ordinary.len() >= 150, "{} ordinary texts", ordinary.len());
    for case in &secrets {
        assert!(
            !case.secrets.is_empty(),
            "{}: no ⟦secret⟧ marked",
            case.label
        );
        for secret in &case.secrets {
            assert!(
                secret.chars().count() >= 6,
                "{}: {secret:?} is too short to check",
                case.label
            );
        }
    }
    for case in &ordinary {
        assert!(
            case.secrets.is_empty(),
            "{}: an ordinary text marks a secret",
            case.label
        );
    }
    let mut labels: Vec<&str> = secrets
        .iter()
        .chain(&ordinary)
        .map(|c| c.label.as_str())
        .collect();
    labels.sort_unstable();
    labels.dedup();
    assert_eq!(
        labels.len(),
        secrets.len() + ordinary.len(),
        "labels are unique"
    );
}

#[test]
fn no_secret_shape_survives_redaction() {
    let redactor = SecretRedactor::new();
    let cases = cases(SECRETS);
    let mut leaks = String::new();
    let mut leaked = 0;
    for case in &cases {
        let redacted = redactor.redact(&case.text);
        let found: Vec<String> = case
            .secrets
            .iter()
            .filter_map(|secret| leftover(&redacted, secret, &case.context))
            .collect();
        if !found.is_empty() {
            leaked += 1;
            let _ = writeln!(
                leaks,
                "  {}: {found:?} left in\n    {redacted:?}",
                case.label
            );
        }
    }
    println!("secret shapes: {} cases, {leaked} leaking", cases.len());
    assert!(
        leaked == 0,
        "{leaked} of {} cases leak:\n{leaks}",
        cases.len()
    );
}

#[test]
fn ordinary_text_comes_back_unchanged() {
    let redactor = SecretRedactor::new();
    let cases = cases(ORDINARY);
    let mut changed = String::new();
    let mut false_positives = 0;
    for case in &cases {
        if let Cow::Owned(redacted) = redactor.redact(&case.text) {
            false_positives += 1;
            let _ = writeln!(
                changed,
                "  {}:\n    {:?}\n -> {redacted:?}",
                case.label, case.text
            );
        }
    }
    let rate = false_positives as f64 / cases.len() as f64;
    println!(
        "ordinary texts: {false_positives} of {} changed, false-positive rate {:.2} %\n{changed}",
        cases.len(),
        rate * 100.0
    );
    assert!(
        rate <= MAX_FALSE_POSITIVE_RATE,
        "{false_positives} of {} ordinary texts changed ({:.2} % > {:.0} %):\n{changed}",
        cases.len(),
        rate * 100.0,
        MAX_FALSE_POSITIVE_RATE * 100.0
    );
}

#[test]
fn redacting_a_corpus_twice_changes_nothing_more() {
    let redactor = SecretRedactor::new();
    let mut unstable = String::new();
    for case in cases(SECRETS).iter().chain(&cases(ORDINARY)) {
        let once = redactor.redact(&case.text);
        if let Cow::Owned(twice) = redactor.redact(&once) {
            let _ = writeln!(unstable, "  {}:\n    {once:?}\n -> {twice:?}", case.label);
        }
    }
    assert!(unstable.is_empty(), "a second pass changed:\n{unstable}");
}

#[test]
fn json_secret_shapes_stay_json() {
    let redactor = SecretRedactor::new();
    let mut broken = String::new();
    let mut checked = 0;
    for case in cases(SECRETS) {
        if serde_json::from_str::<serde_json::Value>(&case.text).is_err() {
            continue;
        }
        checked += 1;
        let redacted = redactor.redact(&case.text);
        if let Err(error) = serde_json::from_str::<serde_json::Value>(&redacted) {
            let _ = writeln!(broken, "  {}: {error}\n    {redacted:?}", case.label);
        }
    }
    assert!(checked >= 20, "only {checked} JSON cases");
    assert!(
        broken.is_empty(),
        "no longer JSON after redaction:\n{broken}"
    );
}
