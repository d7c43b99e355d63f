//! gitleaks' rule set, read from `data/gitleaks/gitleaks.toml` (MIT, see
//! `data/gitleaks/LICENSE`; the release is named in `data/gitleaks/VERSION`,
//! and `data/gitleaks/update.sh` moves to another one).
//!
//! Each rule is applied the way gitleaks applies it to a file:
//!
//! - it runs only when one of its `keywords` occurs in the text (any case);
//!   one Aho-Corasick pass over the text finds them all, so a large result
//!   with none of them costs one linear scan, not one per rule;
//! - its secret is its `secretGroup`, else the first capture group that
//!   matched something (not one a quantifier repeats, which is part of the
//!   shape), else the whole match; only that part is replaced, up to the
//!   end of the token it starts (`glpat-[\w-]{20}` fixes a length a longer
//!   token would outgrow);
//! - a finding is dropped when the secret's Shannon entropy is not above
//!   the rule's `entropy`, or when the global or the rule's allowlist
//!   allows it (`regexes` on the secret, the match or the line as
//!   `regexTarget` says, `stopwords` in the secret, `condition` OR/AND).
//!   A result has no file path and no commit: allowlist entries that need
//!   one never apply, and rules that narrow themselves to some `path`
//!   apply everywhere (a redactor errs towards hiding).
//!
//! The patterns are RE2 (Go) syntax; the `regex` crate reads nearly all of
//! it. Two differences are translated rather than left to fail: Go's `\w`,
//! `\d`, `\s` and `\b` are ASCII-only (here they would be Unicode, which is
//! both wider than the rules mean and much slower on non-ASCII text; three
//! rules would even exceed the crate's size limit for a compiled regex), and
//! Go reads a `{` that starts no repetition as a literal brace. A rule
//! whose pattern still does not compile is skipped and counted; the
//! module's tests pin the list of rules that do not run. One change is
//! made on purpose: the usual end of a secret (a quote, a space, `;`) also
//! accepts sentence punctuation ([`SECRET_END_IN_PROSE`]), so a token that
//! ends a sentence is found too.

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{LazyLock, OnceLock};

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use regex::{Regex, RegexBuilder};
use serde::Deserialize;

use super::json::push_json_safe_parts;
use super::{REDACTED, replace_ranges};

const CONFIG: &str = include_str!("../../../data/gitleaks/gitleaks.toml");
const VERSION: &str = include_str!("../../../data/gitleaks/VERSION");

/// Rules left out on purpose: for each, why. Their secrets are still
/// caught where they matter, by the key/value rules of this module's
/// parent, which know the shape of a key and check the value.
const DISABLED: &[(&str, &str)] = &[(
    "generic-api-key",
    "any key containing `key`, `api`, `auth`, `access` or `token` followed \
     by 10+ word characters: ids, hashes, UUIDs and version strings in \
     ordinary JSON and logs match, and the entropy floor (3.5) does not \
     separate them from secrets; the key/value rules cover the real cases",
)];

/// The rule set, parsed on first use; each rule's patterns compile the
/// first time a text holds one of its keywords (most texts name few of
/// them, and compiling all of them takes most of a second in a debug
/// build).
pub(super) static RULES: LazyLock<RuleSet> = LazyLock::new(|| RuleSet::parse(CONFIG));

/// The upstream release the rules come from (the `tag=` line of VERSION).
pub(super) fn version() -> &'static str {
    VERSION
        .lines()
        .find_map(|line| line.strip_prefix("tag="))
        .unwrap_or("unknown")
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct ConfigFile {
    #[serde(default)]
    allowlist: Option<AllowlistConfig>,
    #[serde(default)]
    allowlists: Vec<AllowlistConfig>,
    #[serde(default)]
    rules: Vec<RuleConfig>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RuleConfig {
    id: String,
    #[serde(default)]
    regex: Option<String>,
    #[serde(default)]
    secret_group: Option<usize>,
    #[serde(default)]
    entropy: Option<f64>,
    #[serde(default)]
    keywords: Vec<String>,
    #[serde(default)]
    allowlists: Vec<AllowlistConfig>,
}

#[derive(Deserialize, Default, Clone)]
#[serde(rename_all = "camelCase")]
struct AllowlistConfig {
    #[serde(default)]
    condition: Option<String>,
    #[serde(default)]
    regex_target: Option<String>,
    #[serde(default)]
    regexes: Vec<String>,
    #[serde(default)]
    stopwords: Vec<String>,
    #[serde(default)]
    paths: Vec<String>,
    #[serde(default)]
    commits: Vec<String>,
}

/// Why a rule of the file does not run.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum SkipReason {
    /// The rule matches file paths only (`pkcs12-file`): a result has none.
    NoPattern,
    /// Left out on purpose; see [`DISABLED`].
    Disabled,
    /// The `regex` crate does not accept the pattern.
    DoesNotCompile,
}

/// Which text an allowlist's `regexes` look at.
#[derive(Clone, Copy)]
enum Target {
    Secret,
    Match,
    Line,
}

struct Allowlist {
    target: Target,
    regexes: Vec<Regex>,
    stopwords: Option<AhoCorasick>,
    /// `condition = "AND"`: every kind of check present must pass.
    all: bool,
    /// The list has path or commit checks, which never pass on a result.
    needs_path_or_commit: bool,
    has_regexes: bool,
}

impl Allowlist {
    fn compile(config: &AllowlistConfig, skipped_patterns: &AtomicUsize) -> Allowlist {
        let regexes: Vec<Regex> = config
            .regexes
            .iter()
            .filter_map(|pattern| {
                let regex = compile(pattern);
                if regex.is_none() {
                    skipped_patterns.fetch_add(1, Ordering::Relaxed);
                }
                regex
            })
            .collect();
        let stopwords = if config.stopwords.is_empty() {
            None
        } else {
            AhoCorasickBuilder::new()
                .ascii_case_insensitive(true)
                .build(config.stopwords.iter().map(|word| word.to_lowercase()))
                .ok()
        };
        Allowlist {
            target: match config.regex_target.as_deref() {
                Some("match") => Target::Match,
                Some("line") => Target::Line,
                _ => Target::Secret,
            },
            // An allowlist whose every pattern failed must not allow
            // everything under AND, nor anything under OR: it has no
            // regex check then, only what else it has.
            has_regexes: !regexes.is_empty(),
            regexes,
            stopwords,
            all: config
                .condition
                .as_deref()
                .is_some_and(|c| c.eq_ignore_ascii_case("and")),
            needs_path_or_commit: !config.paths.is_empty() || !config.commits.is_empty(),
        }
    }

    fn allows(&self, secret: &str, whole: &str, line: &str) -> bool {
        let target = match self.target {
            Target::Secret => secret,
            Target::Match => whole,
            Target::Line => line,
        };
        let regex = || self.regexes.iter().any(|r| r.is_match(target));
        let stopword = || {
            self.stopwords
                .as_ref()
                .is_some_and(|words| words.is_match(secret))
        };
        if self.all {
            let has_checks = self.has_regexes || self.stopwords.is_some();
            !self.needs_path_or_commit
                && has_checks
                && (!self.has_regexes || regex())
                && (self.stopwords.is_none() || stopword())
        } else {
            (self.has_regexes && regex()) || stopword()
        }
    }
}

struct Rule {
    id: String,
    /// The pattern as the file writes it.
    pattern: String,
    secret_group: Option<usize>,
    entropy: Option<f64>,
    allowlist_configs: Vec<AllowlistConfig>,
    /// The compiled patterns, made on first need; `None` inside when the
    /// `regex` crate does not accept the pattern.
    compiled: OnceLock<Option<Compiled>>,
}

/// A rule's patterns, compiled.
struct Compiled {
    regex: Regex,
    /// For each capture group, whether a quantifier repeats it: such a
    /// group (`([a-z0-9]{4}-){3}` in the Teams webhook rule) is part of
    /// the shape, not the secret, though gitleaks would report it.
    repeated: Vec<bool>,
    /// A cheap pattern the text must match for the rule to match: see
    /// [`vendor_gate`].
    gate: Option<Regex>,
    allowlists: Vec<Allowlist>,
}

/// Every rule of the file that runs, and the keyword index that decides
/// which of them look at a text.
pub(super) struct RuleSet {
    rules: Vec<Rule>,
    global: Vec<Allowlist>,
    /// Every keyword of every rule, lower-cased, matched in any ASCII case.
    keywords: Option<AhoCorasick>,
    /// For each keyword of `keywords`, the rules that name it.
    keyword_rules: Vec<Vec<usize>>,
    /// Rules without keywords: they look at every text.
    unconditional: Vec<usize>,
    skipped: Vec<(String, SkipReason)>,
    skipped_allowlist_patterns: AtomicUsize,
}

impl RuleSet {
    /// Parses and compiles a gitleaks config. A config that does not parse
    /// gives an empty set (the vendored file is checked by the tests, so
    /// this is not expected at run time), never a panic.
    fn parse(config: &str) -> RuleSet {
        let file: ConfigFile = toml::from_str(config).unwrap_or_default();
        let skipped_allowlist_patterns = AtomicUsize::new(0);
        let global = file
            .allowlist
            .iter()
            .chain(&file.allowlists)
            .map(|a| Allowlist::compile(a, &skipped_allowlist_patterns))
            .collect();
        let mut rules = Vec::new();
        let mut skipped = Vec::new();
        let mut keyword_list: Vec<String> = Vec::new();
        let mut keyword_rules: Vec<Vec<usize>> = Vec::new();
        let mut unconditional = Vec::new();
        for config in file.rules {
            if DISABLED.iter().any(|(id, _)| *id == config.id) {
                skipped.push((config.id, SkipReason::Disabled));
                continue;
            }
            let Some(pattern) = config.regex else {
                skipped.push((config.id, SkipReason::NoPattern));
                continue;
            };
            let index = rules.len();
            if config.keywords.is_empty() {
                unconditional.push(index);
            }
            for keyword in &config.keywords {
                let keyword = keyword.to_lowercase();
                match keyword_list.iter().position(|k| *k == keyword) {
                    Some(at) => keyword_rules[at].push(index),
                    None => {
                        keyword_list.push(keyword);
                        keyword_rules.push(vec![index]);
                    }
                }
            }
            rules.push(Rule {
                id: config.id,
                pattern,
                secret_group: config.secret_group.filter(|&group| group > 0),
                entropy: config.entropy.filter(|&entropy| entropy > 0.0),
                allowlist_configs: config.allowlists,
                compiled: OnceLock::new(),
            });
        }
        let keywords = AhoCorasickBuilder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .kind(Some(aho_corasick::AhoCorasickKind::DFA))
            .build(&keyword_list)
            .ok();
        RuleSet {
            rules,
            global,
            keywords,
            keyword_rules,
            unconditional,
            skipped,
            skipped_allowlist_patterns,
        }
    }

    /// How many rules run (compiling every rule not compiled yet).
    pub(super) fn len(&self) -> usize {
        self.rules
            .iter()
            .filter(|rule| rule.compiled(&self.skipped_allowlist_patterns).is_some())
            .count()
    }

    /// The rules of the file that do not run, and why (compiling every
    /// rule not compiled yet).
    pub(super) fn skipped(&self) -> Vec<(String, SkipReason)> {
        let mut skipped = self.skipped.clone();
        skipped.extend(
            self.rules
                .iter()
                .filter(|rule| rule.compiled(&self.skipped_allowlist_patterns).is_none())
                .map(|rule| (rule.id.clone(), SkipReason::DoesNotCompile)),
        );
        skipped
    }

    /// How many rules have compiled so far.
    #[cfg(test)]
    fn compiled_so_far(&self) -> usize {
        self.rules
            .iter()
            .filter(|rule| rule.compiled.get().is_some())
            .count()
    }

    /// What a `Debug` form says of the set: the release, how many rules
    /// run, which do not and why.
    pub(super) fn summary(&self) -> String {
        let skipped: Vec<String> = self
            .skipped()
            .iter()
            .map(|(id, reason)| format!("{id}: {reason:?}"))
            .collect();
        let mut summary = format!(
            "gitleaks {} ({} rules; skipped {})",
            version(),
            self.len(),
            skipped.join(", ")
        );
        let skipped_allowlist_patterns = self.skipped_allowlist_patterns.load(Ordering::Relaxed);
        if skipped_allowlist_patterns > 0 {
            summary.push_str(&format!(
                "; {skipped_allowlist_patterns} allowlist patterns skipped"
            ));
        }
        summary
    }

    /// Writes `text` with every secret a rule finds replaced by
    /// `[REDACTED]` into `out`; whether there was any. All rules look at the same text and their findings
    /// are merged, so overlapping findings become one replacement.
    pub(super) fn redact(&self, text: &str, out: &mut String) -> bool {
        let mut ranges = Vec::new();
        for index in self.candidates(text) {
            let rule = &self.rules[index];
            if let Some(compiled) = rule.compiled(&self.skipped_allowlist_patterns) {
                rule.find(compiled, text, &self.global, &mut ranges);
            }
        }
        replace_ranges(text, ranges, REDACTED, out)
    }

    /// The rules whose keywords occur in `text`, in file order.
    fn candidates(&self, text: &str) -> Vec<usize> {
        let mut wanted = vec![false; self.rules.len()];
        for &index in &self.unconditional {
            wanted[index] = true;
        }
        if let Some(keywords) = &self.keywords {
            let mut seen = vec![false; self.keyword_rules.len()];
            let mut left = seen.len();
            for found in keywords.find_overlapping_iter(text) {
                let keyword = found.pattern().as_usize();
                if !seen[keyword] {
                    seen[keyword] = true;
                    for &index in &self.keyword_rules[keyword] {
                        wanted[index] = true;
                    }
                    left -= 1;
                    if left == 0 {
                        break;
                    }
                }
            }
        }
        wanted
            .iter()
            .enumerate()
            .filter_map(|(index, &wanted)| wanted.then_some(index))
            .collect()
    }
}

impl Rule {
    /// The rule's patterns, compiled on the first call.
    fn compiled(&self, skipped_allowlist_patterns: &AtomicUsize) -> Option<&Compiled> {
        self.compiled
            .get_or_init(|| {
                let regex = compile(&self.pattern)?;
                let translated = translate(&self.pattern);
                Some(Compiled {
                    regex,
                    repeated: repeated_groups(&translated),
                    gate: vendor_gate(&translated),
                    allowlists: self
                        .allowlist_configs
                        .iter()
                        .map(|a| Allowlist::compile(a, skipped_allowlist_patterns))
                        .collect(),
                })
            })
            .as_ref()
    }

    fn find(
        &self,
        compiled: &Compiled,
        text: &str,
        global: &[Allowlist],
        out: &mut Vec<Range<usize>>,
    ) {
        if compiled
            .gate
            .as_ref()
            .is_some_and(|gate| !gate.is_match(text))
        {
            return;
        }
        for captures in compiled.regex.captures_iter(text) {
            let Some(whole) = captures.get(0) else {
                continue;
            };
            let secret = match self.secret_group {
                Some(group) => match captures.get(group) {
                    Some(secret) => secret,
                    None => continue,
                },
                None => captures
                    .iter()
                    .enumerate()
                    .skip(1)
                    .filter(|(index, _)| !compiled.repeated.get(*index).copied().unwrap_or(false))
                    .find_map(|(_, group)| group.filter(|group| !group.is_empty()))
                    .unwrap_or(whole),
            };
            if secret.is_empty() {
                continue;
            }
            if let Some(floor) = self.entropy
                && shannon_entropy(secret.as_str()) <= floor
            {
                continue;
            }
            // gitleaks trims line breaks off the match before its checks.
            let matched = whole.as_str().trim_matches('\n');
            let line_start = text[..whole.start()].rfind('\n').map_or(0, |at| at + 1);
            let line_end = text[whole.end()..]
                .find('\n')
                .map_or(text.len(), |at| whole.end() + at);
            let line = &text[line_start..line_end];
            let allowed = global
                .iter()
                .chain(&compiled.allowlists)
                .any(|list| list.allows(secret.as_str(), matched, line));
            if !allowed {
                // Many patterns fix a token's length and end with no
                // boundary (`glpat-[\w-]{20}`): a longer token of the same
                // kind would keep its tail. The secret runs on to the end
                // of the token.
                let tail = text[secret.end()..]
                    .bytes()
                    .take_while(|&b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
                    .count();
                push_json_safe_parts(text, secret.start()..secret.end() + tail, out);
            }
        }
    }
}

/// Shannon entropy in bits per character, as gitleaks computes it
/// (characters counted, divided by the length in bytes).
fn shannon_entropy(text: &str) -> f64 {
    let mut ascii = [0u32; 128];
    let mut other: Vec<(char, u32)> = Vec::new();
    for ch in text.chars() {
        match usize::try_from(u32::from(ch)) {
            Ok(code) if code < 128 => ascii[code] += 1,
            _ => match other.iter_mut().find(|(c, _)| *c == ch) {
                Some((_, count)) => *count += 1,
                None => other.push((ch, 1)),
            },
        }
    }
    let length = text.len() as f64;
    ascii
        .iter()
        .copied()
        .chain(other.iter().map(|&(_, count)| count))
        .filter(|&count| count > 0)
        .map(|count| {
            let frequency = f64::from(count) / length;
            -frequency * frequency.log2()
        })
        .sum()
}

/// How most of gitleaks' patterns end a secret: a quote, a space, `;`,
/// an escaped line break or the end of the text.
const SECRET_END: &str = r#"(?:[\x60'"\s;]|\\[nr]|$)"#;

/// The same, and sentence punctuation too, so that a token at the end of a
/// sentence or inside brackets (`… dop_v1_….`, `(npm_…)`) is found: the
/// secret group stays the same, only where it may stop grows.
const SECRET_END_IN_PROSE: &str = r#"(?:[\x60'"\s;.,)\]}>]|\\[nr]|$)"#;

fn compile(pattern: &str) -> Option<Regex> {
    RegexBuilder::new(&translate(
        &pattern.replace(SECRET_END, SECRET_END_IN_PROSE),
    ))
    .size_limit(1 << 23)
    .build()
    .ok()
}

/// Go (RE2) pattern → `regex` crate pattern: ASCII `\w \d \s \b` as Go
/// means them, and a `{` that starts no repetition escaped.
fn translate(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len() + 16);
    let chars: Vec<char> = pattern.chars().collect();
    let mut in_class = false;
    let mut at = 0;
    while at < chars.len() {
        let ch = chars[at];
        match ch {
            '\\' if at + 1 < chars.len() => {
                let next = chars[at + 1];
                at += 2;
                let replacement = match (in_class, next) {
                    (false, 'w') => "[0-9A-Za-z_]",
                    (false, 'W') => "[^0-9A-Za-z_]",
                    (false, 'd') => "[0-9]",
                    (false, 'D') => "[^0-9]",
                    (false, 's') => r"[\t\n\f\r ]",
                    (false, 'S') => r"[^\t\n\f\r ]",
                    (false, 'b') => r"(?-u:\b)",
                    (false, 'B') => r"(?-u:\B)",
                    (true, 'w') => "0-9A-Za-z_",
                    (true, 'd') => "0-9",
                    (true, 's') => r"\t\n\f\r ",
                    _ => {
                        out.push('\\');
                        out.push(next);
                        // `\p{…}`, `\x{…}`: copy the braces as they are.
                        if matches!(next, 'p' | 'P' | 'x') && chars.get(at) == Some(&'{') {
                            while at < chars.len() {
                                out.push(chars[at]);
                                at += 1;
                                if chars[at - 1] == '}' {
                                    break;
                                }
                            }
                        }
                        continue;
                    }
                };
                out.push_str(replacement);
            }
            '[' if !in_class => {
                in_class = true;
                out.push('[');
                at += 1;
                // A `]` or `^]` right after the opening bracket is literal.
                if chars.get(at) == Some(&'^') {
                    out.push('^');
                    at += 1;
                }
                if chars.get(at) == Some(&']') {
                    out.push_str(r"\]");
                    at += 1;
                }
            }
            '[' if in_class && chars.get(at + 1) == Some(&':') => {
                // A POSIX class `[:alnum:]` inside a bracket expression.
                let rest: String = chars[at..].iter().collect();
                match rest.find(":]") {
                    Some(end) => {
                        out.push_str(&rest[..end + 2]);
                        at += rest[..end + 2].chars().count();
                    }
                    None => {
                        out.push_str(r"\[");
                        at += 1;
                    }
                }
            }
            '[' => {
                out.push_str(r"\[");
                at += 1;
            }
            ']' if in_class => {
                in_class = false;
                out.push(']');
                at += 1;
            }
            '{' if !in_class => match repetition_length(&chars[at..]) {
                Some(length) => {
                    out.extend(&chars[at..at + length]);
                    at += length;
                }
                None => {
                    out.push_str(r"\{");
                    at += 1;
                }
            },
            '}' if !in_class => {
                out.push_str(r"\}");
                at += 1;
            }
            _ => {
                out.push(ch);
                at += 1;
            }
        }
    }
    out
}

/// Most vendor rules are `(?i)[\w.-]{0,50}?(?:vendor names)…secret…`,
/// and their keywords are often not the vendor's name (`lob-api-key` runs
/// on every text holding `live_`). The regex engine finds no literal to
/// skip ahead with in such a pattern and scans the whole text with its
/// automaton; the vendor-name group alone, which every match must contain,
/// is a pattern it finds with a literal search. So that group becomes the
/// rule's gate. Patterns of another shape, or with a `|` at the top level
/// (where the group would not be required), get no gate.
fn vendor_gate(pattern: &str) -> Option<Regex> {
    const PREFIX: &str = "[0-9A-Za-z_.-]{0,50}?";
    let rest = pattern
        .strip_prefix("(?i)")
        .and_then(|rest| rest.strip_prefix(PREFIX))
        .or_else(|| {
            pattern
                .strip_prefix(PREFIX)
                .and_then(|rest| rest.strip_prefix("(?i:"))
                .and_then(|rest| rest.strip_prefix(PREFIX))
        })?;
    if !rest.starts_with("(?:") || has_top_level_alternation(pattern) {
        return None;
    }
    let end = group_end(rest)?;
    if matches!(rest[end..].chars().next(), Some('?' | '*' | '{')) {
        return None;
    }
    RegexBuilder::new(&format!("(?i){}", &rest[..end]))
        .build()
        .ok()
}

/// The offset just after the group that `text` starts with.
fn group_end(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut in_class = false;
    let mut escaped = false;
    for (at, ch) in text.char_indices() {
        match ch {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '[' if !in_class => in_class = true,
            ']' if in_class => in_class = false,
            '(' if !in_class => depth += 1,
            ')' if !in_class => {
                depth -= 1;
                if depth == 0 {
                    return Some(at + 1);
                }
            }
            _ => {}
        }
    }
    None
}

fn has_top_level_alternation(pattern: &str) -> bool {
    let mut depth = 0usize;
    let mut in_class = false;
    let mut escaped = false;
    for ch in pattern.chars() {
        match ch {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '[' if !in_class => in_class = true,
            ']' if in_class => in_class = false,
            '(' if !in_class => depth += 1,
            ')' if !in_class => depth = depth.saturating_sub(1),
            '|' if !in_class && depth == 0 => return true,
            _ => {}
        }
    }
    false
}

/// For each capture group of a (translated) pattern, by number, whether a
/// quantifier follows its closing parenthesis. Group 0 is the whole match.
fn repeated_groups(pattern: &str) -> Vec<bool> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut repeated = vec![false];
    let mut open: Vec<Option<usize>> = Vec::new();
    let mut in_class = false;
    let mut at = 0;
    while at < chars.len() {
        match chars[at] {
            '\\' => at += 1,
            '[' if !in_class => {
                in_class = true;
                // A `]` right after `[` or `[^` is literal.
                if chars.get(at + 1) == Some(&'^') {
                    at += 1;
                }
                if chars.get(at + 1) == Some(&']') {
                    at += 1;
                }
            }
            '[' if chars.get(at + 1) == Some(&':') => {
                // `[:alnum:]` inside a class
                while at < chars.len() && !(chars[at] == ']' && chars[at - 1] == ':') {
                    at += 1;
                }
            }
            ']' if in_class => in_class = false,
            '(' if !in_class => {
                let named = chars.get(at + 1) == Some(&'?')
                    && matches!(chars.get(at + 2), Some('P' | '<'))
                    && chars.get(at + 3) != Some(&'=')
                    && chars.get(at + 3) != Some(&'!');
                if chars.get(at + 1) != Some(&'?') || named {
                    open.push(Some(repeated.len()));
                    repeated.push(false);
                } else {
                    open.push(None);
                }
            }
            ')' if !in_class => {
                if let Some(Some(group)) = open.pop() {
                    repeated[group] = matches!(chars.get(at + 1), Some('*' | '+' | '?' | '{'));
                }
            }
            _ => {}
        }
        at += 1;
    }
    repeated
}

/// The length of `{n}`, `{n,}` or `{n,m}` at the start of `rest`, if
/// it starts with one.
fn repetition_length(rest: &[char]) -> Option<usize> {
    let end = rest.iter().position(|&c| c == '}')?;
    let inner: String = rest[1..end].iter().collect();
    let (low, high) = inner.split_once(',').unwrap_or((&inner, ""));
    let digits = |s: &str| s.chars().all(|c| c.is_ascii_digit());
    (!low.is_empty() && digits(low) && digits(high)).then_some(end + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rule_compiles_only_once_a_text_names_one_of_its_keywords() {
        let rules = RuleSet::parse(CONFIG);
        assert_eq!(rules.compiled_so_far(), 0, "parsing compiles nothing");
        let unconditional = rules.unconditional.len();
        let mut out = String::new();
        assert!(!rules.redact("an ordinary sentence about the weather", &mut out));
        assert_eq!(rules.compiled_so_far(), unconditional);
        let token = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
        assert!(rules.redact(&format!("token: {token}"), &mut out));
        assert!(!out.contains(token), "{out}");
        let after_one_token = rules.compiled_so_far();
        assert!(
            after_one_token > unconditional && after_one_token < unconditional + 10,
            "{after_one_token} rules compiled for one GitHub token"
        );
        // Counting the rules that run compiles the rest.
        assert_eq!(rules.len(), RULES.len());
        assert_eq!(rules.compiled_so_far(), rules.rules.len());
    }

    #[test]
    fn the_vendored_file_parses_into_hundreds_of_rules() {
        let file: Result<ConfigFile, _> = toml::from_str(CONFIG);
        assert!(file.is_ok(), "{:?}", file.err());
        assert!(RULES.len() > 200, "{} rules", RULES.len());
        assert_eq!(version(), "v8.30.1");
    }

    /// Every rule that does not run, and why: a new release that adds to
    /// this list must say so here (and in the module's docs).
    #[test]
    fn the_rules_left_out_are_few_and_known() {
        let all_skipped = RULES.skipped();
        let skipped: Vec<(&str, SkipReason)> = all_skipped
            .iter()
            .map(|(id, reason)| (id.as_str(), reason.clone()))
            .collect();
        assert_eq!(
            skipped,
            [
                ("generic-api-key", SkipReason::Disabled),
                ("pkcs12-file", SkipReason::NoPattern),
            ]
        );
        assert!(
            !skipped
                .iter()
                .any(|(_, reason)| *reason == SkipReason::DoesNotCompile),
            "every pattern compiles"
        );
        assert_eq!(RULES.skipped_allowlist_patterns.load(Ordering::Relaxed), 0);
        assert_eq!(RULES.len() + skipped.len(), 222);
    }

    #[test]
    fn most_rules_end_their_secret_the_same_way() {
        let file: ConfigFile = toml::from_str(CONFIG).unwrap_or_default();
        let ending = file
            .rules
            .iter()
            .filter(|rule| {
                rule.regex
                    .as_deref()
                    .is_some_and(|r| r.contains(SECRET_END))
            })
            .count();
        assert!(ending > 100, "{ending} rules end with {SECRET_END}");
    }

    #[test]
    fn go_classes_are_ascii_and_literal_braces_are_escaped() {
        assert_eq!(translate(r"\w+\b"), r"[0-9A-Za-z_]+(?-u:\b)");
        assert_eq!(translate(r"[\w.-]{0,50}"), r"[0-9A-Za-z_.-]{0,50}");
        assert_eq!(translate(r"^\${(?:[A-Z_]+)}$"), r"^\$\{(?:[A-Z_]+)\}$");
        assert_eq!(translate(r"[[:alnum:]]{14}"), r"[[:alnum:]]{14}");
        assert_eq!(translate(r"\p{L}\x{41}"), r"\p{L}\x{41}");
    }

    #[test]
    fn repeated_groups_are_found() {
        assert_eq!(
            repeated_groups(r"(a)([b-c]{4}-){3}(?:d)(?P<e>f)+"),
            [false, false, true, true]
        );
        assert_eq!(repeated_groups(r"[(](x)\((y)?"), [false, false, true]);
    }

    #[test]
    fn vendor_rules_are_gated_by_their_vendor_names() {
        let gate = |pattern: &str| vendor_gate(&translate(pattern)).map(|g| g.as_str().to_owned());
        assert_eq!(
            gate(r#"(?i)[\w.-]{0,50}?(?:lob)(?:[ \t\w.-]{0,20})[\s'"]{0,3}(?:=|>)([a-z]{4})"#)
                .as_deref(),
            Some("(?i)(?:lob)")
        );
        assert_eq!(
            gate(r"[\w.-]{0,50}?(?i:[\w.-]{0,50}?(?:(?-i:[Oo]kta|OKTA))(?:x))(00[\w=\-]{40})")
                .as_deref(),
            Some("(?i)(?:(?-i:[Oo]kta|OKTA))")
        );
        // A top-level alternative need not hold the vendor name.
        assert_eq!(
            gate(r"(?i)[\w.-]{0,50}?(?:jira)(x)|\b(ATATT3[A-Za-z0-9]{186})"),
            None
        );
        assert_eq!(gate(r"\b(ghp_[0-9a-zA-Z]{36})"), None);
        let gated = RULES
            .rules
            .iter()
            .filter_map(|rule| rule.compiled(&RULES.skipped_allowlist_patterns))
            .filter(|compiled| compiled.gate.is_some())
            .count();
        assert!(gated > 80, "{gated} rules gated");
    }

    #[test]
    fn entropy_is_gitleaks_shannon_entropy() {
        assert!(shannon_entropy("aaaa").abs() < 1e-9);
        assert!((shannon_entropy("abcd") - 2.0).abs() < 1e-9);
    }
}
