//! [`SecretRedactor`]: replaces secrets in tool results before the agent,
//! the events and the logs see them.
//!
//! The rules run in this order, each on the output of the one before:
//!
//! 1. string literals joined in code ([`joined`]), and tokens broken over
//!    lines ([`split`]), while every piece is still whole;
//! 2. fixed formats with their own label ([`patterns`]): private-key
//!    blocks, JSON Web Tokens, OpenAI, AWS (the key id, and the secret
//!    next to it), GitHub, Slack, Google, Hugging Face and Discord tokens,
//!    `Bearer` credentials, and passwords in URLs;
//! 3. gitleaks' rule set, as data ([`gitleaks`]);
//! 4. generic key/value detection ([`key_value`]): secret-looking keys in
//!    JSON, YAML (values on the key's line or the lines below), XML, env
//!    and INI files, HTTP headers, command lines and `.netrc` files;
//! 5. credential files known by their layout ([`files`]): `.pgpass`,
//!    `/etc/shadow` and `.htpasswd` hashes, Redis passwords, CSV columns
//!    named like secrets;
//! 6. e-mail addresses;
//! 7. base64 runs that decode to text holding a secret ([`encoded`]);
//! 8. the patterns added with [`SecretRedactor::with_pattern`].
//!
//! Rules 1 and 7 make a text from parts of the text (the contents of the
//! literals joined, the pieces of a broken token joined, a run decoded) and ask rules 2 to 6 whether it holds a
//! secret; their work is bounded per text.
//!
//! All of them look at the decoded view of [`json`], so JSON escapes hide
//! nothing, and none of them removes a quote of a JSON document.

mod encoded;
mod files;
mod gitleaks;
mod joined;
mod json;
mod key_value;
mod patterns;
mod split;

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;
use std::sync::{Arc, LazyLock};

use hooks_core::{Redact, ToolCallHookContext};
use regex::{Captures, Regex};

/// What replaces a secret that has no label of its own.
const REDACTED: &str = "[REDACTED]";

#[derive(Clone)]
enum Rule {
    /// A pattern and a `regex` replacement template (`$name`, `${1}`,
    /// `$$`): the labelled built-in formats and every `with_pattern`.
    Template { regex: Regex, replacement: String },
    /// A pattern whose every match code looks at before anything is
    /// replaced (keys, values, URLs).
    Checked(&'static CheckedRule),
    /// gitleaks' rules, applied together in one pass.
    Gitleaks(&'static gitleaks::RuleSet),
    /// A rule that looks at a text made from parts of the text (string
    /// literals joined, base64 decoded) and asks the other built-in rules
    /// whether it holds a secret; or one that reads a whole file layout.
    Whole {
        name: &'static str,
        apply: fn(text: &str, out: &mut String) -> bool,
    },
}

impl Rule {
    fn template(regex: Regex, replacement: impl Into<String>) -> Rule {
        Rule::Template {
            regex,
            replacement: replacement.into(),
        }
    }

    /// Writes `text` with this rule's replacements into `out` and says
    /// whether there were any (`out` is left alone when there were none).
    fn apply(&self, text: &str, out: &mut String) -> bool {
        match self {
            Rule::Template { regex, replacement } => apply_template(regex, replacement, text, out),
            Rule::Checked(rule) => rule.apply(text, out),
            Rule::Gitleaks(rules) => rules.redact(text, out),
            Rule::Whole { apply, .. } => apply(text, out),
        }
    }

    fn pattern_count(&self) -> usize {
        match self {
            Rule::Template { .. } | Rule::Checked(_) | Rule::Whole { .. } => 1,
            Rule::Gitleaks(rules) => rules.len(),
        }
    }
}

/// Replaces every match; no change when no replacement differs from what
/// it matched (so a second pass over redacted text is a no-op).
fn apply_template(regex: &Regex, template: &str, text: &str, out: &mut String) -> bool {
    let mut output = Output::new(out);
    let mut replacement = String::new();
    for captures in regex.captures_iter(text) {
        let found = captures.get_match();
        replacement.clear();
        captures.expand(template, &mut replacement);
        if replacement != found.as_str() {
            output.replace(text, found.range(), &[&replacement]);
        }
    }
    output.finish(text)
}

/// A rule's output, written into a buffer that the rules of one `redact`
/// call take turns with (two buffers in all, however many rules change
/// the text). Nothing is written before the first replacement.
struct Output<'o> {
    buffer: &'o mut String,
    copied: usize,
    started: bool,
}

impl<'o> Output<'o> {
    fn new(buffer: &'o mut String) -> Output<'o> {
        Output {
            buffer,
            copied: 0,
            started: false,
        }
    }

    /// Where the text not yet copied starts.
    fn copied(&self) -> usize {
        self.copied
    }

    /// Copies `text` up to `range`, then `parts` in its place.
    fn replace(&mut self, text: &str, range: Range<usize>, parts: &[&str]) {
        if !self.started {
            self.started = true;
            self.buffer.clear();
            self.buffer.reserve(text.len());
        }
        self.buffer.push_str(&text[self.copied..range.start]);
        for part in parts {
            self.buffer.push_str(part);
        }
        self.copied = range.end;
    }

    /// Copies the rest of `text`; whether anything was replaced.
    fn finish(self, text: &str) -> bool {
        if self.started {
            self.buffer.push_str(&text[self.copied..]);
        }
        self.started
    }
}

/// Replaces each of `ranges` (in any order, overlapping or not) with
/// `label`; overlapping or touching ranges become one replacement.
/// Written into `out`; whether anything changed.
fn replace_ranges(
    text: &str,
    mut ranges: Vec<Range<usize>>,
    label: &str,
    out: &mut String,
) -> bool {
    ranges.sort_by_key(|range| range.start);
    let mut output = Output::new(out);
    let mut ranges = ranges.into_iter().peekable();
    while let Some(mut range) = ranges.next() {
        while let Some(next) = ranges.peek() {
            if next.start > range.end {
                break;
            }
            range.end = range.end.max(next.end);
            ranges.next();
        }
        if range.start < output.copied() || &text[range.clone()] == label {
            continue;
        }
        output.replace(text, range, &[label]);
    }
    output.finish(text)
}

/// What a [`CheckedRule`] makes of one match.
enum Decision {
    /// Not a secret: leave the text, and search again from this offset (a
    /// char boundary after the match's start).
    Keep { resume: usize },
    /// Replace `range` with `label`, between two copies of the text at
    /// `quote` if given (a bare value after a quoted key is quoted like
    /// the key, so JSON stays JSON).
    Replace {
        range: Range<usize>,
        label: &'static str,
        quote: Option<Range<usize>>,
    },
}

/// Looks at one match: `text` is the whole text the rule runs on.
type Decide = fn(text: &str, captures: &Captures<'_>) -> Decision;

/// A pattern and the code that decides, match by match, what to replace.
struct CheckedRule {
    regex: Regex,
    decide: Decide,
}

impl CheckedRule {
    /// `None` if the pattern does not compile: the rule is then missing
    /// (and this module's tests say which), never a panic at run time.
    fn new(pattern: &str, decide: Decide) -> Option<CheckedRule> {
        Some(CheckedRule {
            regex: compile(pattern)?,
            decide,
        })
    }

    fn apply(&self, text: &str, out: &mut String) -> bool {
        let mut output = Output::new(out);
        let mut at = 0;
        while at <= text.len() {
            let Some(captures) = self.regex.captures_at(text, at) else {
                break;
            };
            let whole = captures.get_match();
            let after_start = next_boundary(text, whole.start() + 1);
            match (self.decide)(text, &captures) {
                Decision::Keep { resume } => at = resume.max(after_start),
                Decision::Replace {
                    range,
                    label,
                    quote,
                } => {
                    at = range.end.max(after_start);
                    let quote = quote.map_or("", |quote| &text[quote]);
                    let found = &text[range.clone()];
                    let unchanged = found.len() == label.len() + 2 * quote.len()
                        && found.starts_with(quote)
                        && found.ends_with(quote)
                        && &found[quote.len()..found.len() - quote.len()] == label;
                    if unchanged || range.start < output.copied() {
                        continue;
                    }
                    output.replace(text, range, &[quote, label, quote]);
                }
            }
        }
        output.finish(text)
    }
}

/// The first char boundary at or after `at` (or the text's end).
fn next_boundary(text: &str, mut at: usize) -> usize {
    while at < text.len() && !text.is_char_boundary(at) {
        at += 1;
    }
    at.min(text.len() + 1)
}

/// The rules that look at the text itself, in the order they run; the
/// rules that look at texts made from it ([`joined`], [`encoded`]) ask
/// these whether such a text holds a secret.
static INNER_RULES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    let mut rules: Vec<Rule> = patterns::LABELLED
        .iter()
        .filter_map(|(pattern, replacement)| Some(Rule::template(compile(pattern)?, *replacement)))
        .collect();
    let before: &'static [CheckedRule] = &patterns::BEFORE_RULE_SET;
    let key_values: &'static [CheckedRule] = &key_value::RULES;
    let files: &'static [CheckedRule] = &files::RULES;
    let after: &'static [CheckedRule] = &patterns::AFTER_KEY_VALUES;
    rules.extend(before.iter().map(Rule::Checked));
    rules.push(Rule::Gitleaks(&gitleaks::RULES));
    rules.extend(key_values.iter().map(Rule::Checked));
    rules.extend(files.iter().map(Rule::Checked));
    rules.push(Rule::Whole {
        name: "CSV columns named like secrets",
        apply: files::csv_columns,
    });
    rules.extend(after.iter().map(Rule::Checked));
    rules
});

/// Compiled once per process; every `SecretRedactor::new` shares them
/// (cloning a `Regex` is a reference count). String literals are joined
/// first, while every piece is still whole; base64 runs are decoded last,
/// once the formats that hold base64 of their own (JSON Web Tokens, key
/// blocks, `Basic` credentials) are gone.
static BUILT_IN_RULES: LazyLock<Arc<Vec<Rule>>> = LazyLock::new(|| {
    let mut rules = vec![
        Rule::Whole {
            name: "joined string literals",
            apply: joined::redact,
        },
        Rule::Whole {
            name: "tokens broken over lines",
            apply: split::redact,
        },
    ];
    rules.extend(INNER_RULES.iter().cloned());
    rules.push(Rule::Whole {
        name: "base64 runs",
        apply: encoded::redact,
    });
    Arc::new(rules)
});

/// Whether any rule of [`INNER_RULES`] finds a secret in `text` (a text
/// made from parts of the one being redacted).
fn holds_secret(text: &str) -> bool {
    let view = json::decode_string_literals(text);
    let mut scratch = String::new();
    INNER_RULES
        .iter()
        .any(|rule| rule.apply(&view, &mut scratch))
}

/// The built-in patterns are constants checked by this module's tests, so
/// compiling cannot fail; if it ever did, the rule would be missing (and
/// the tests would say which), never a panic at run time.
fn compile(pattern: &str) -> Option<Regex> {
    Regex::new(pattern).ok()
}

/// Replaces secrets in text: a reusable `POST_TOOL_CALL` hook.
///
/// [`SecretRedactor::new`] knows these formats:
///
/// | secret | example | becomes |
/// |---|---|---|
/// | private keys | PEM (`-----BEGIN … PRIVATE KEY-----`) and PGP (`-----BEGIN PGP PRIVATE KEY BLOCK-----`) blocks, also cut off before their `END` line | `[PRIVATE-KEY-REDACTED]` |
/// | JSON Web Tokens | `eyJ….….…` | `[JWT-REDACTED]` |
/// | OpenAI-style keys | `sk-…`, `sk-proj-…` (20+ characters after `sk-`) | `[OPENAI-KEY-REDACTED]` |
/// | AWS access key ids | `AKIA…`, `ASIA…` (+ 16) | `[AWS-KEY-REDACTED]` |
/// | AWS secret keys by their place | after the key id (`AKIA… wJalr…`, `accessKeys.csv` rows, `aws iam create-access-key` output), after `Secret Access Key [None]:` | `[REDACTED]` |
/// | GitHub tokens | `ghp_…`, `gho_…`, `ghs_…`, `github_pat_…` | `[GITHUB-TOKEN-REDACTED]` |
/// | Slack tokens | `xoxb-…`, `xoxp-…`, `xoxa-…`, `xoxs-…` | `[SLACK-TOKEN-REDACTED]` |
/// | Google API keys | `AIza…` | `[GOOGLE-KEY-REDACTED]` |
/// | GCP key ids | `"private_key_id": "<40 hex>"` | the id becomes `[REDACTED]` |
/// | Hugging Face tokens | `hf_…`, `api_org_…` (34+ letters and digits) | `[HUGGING-FACE-TOKEN-REDACTED]` |
/// | Discord bot tokens | `MTk4NjIy….Cl2FMQ.ZnCj…` (the first part the base64 of a snowflake id; older and newer lengths, also right after a JSON escape such as `\n`) | `[DISCORD-TOKEN-REDACTED]` |
/// | Discord webhooks | `discord.com/api/v10/webhooks/<id>/<token>` | the token becomes `[REDACTED]` |
/// | bearer credentials | `Bearer <token>` (any case) | `Bearer [REDACTED]` |
/// | passwords in URLs | `postgres://ada:pw@db:5432/app` | `postgres://ada:[REDACTED]@db:5432/app` |
/// | gitleaks' rules | some 200 token formats (`glpat-…`, `sk_live_…`, `npm_…`, `hf_…`, `dop_v1_…`, …) | `[REDACTED]` in place of the secret part |
/// | key/value pairs | `"dbPassword": "…"`, `PGPASSWORD=…`, `<password>…</password>`, `Authorization: Basic …`, `Cookie: …`, `--token …` | the value becomes `[REDACTED]`; key, quoting and an auth scheme stay |
/// | credential files | `.pgpass` lines (`db:5432:app:ada:…`), `/etc/shadow` and `.htpasswd` hashes (`ada:$6$…`), `requirepass …`, CSV columns named like secrets (`Password`, `Secret access key`) | the password or hash becomes `[REDACTED]` |
/// | e-mail addresses | `ada@example.com` | `[EMAIL-REDACTED]` |
/// | joined string literals | `"ghp_abc" + "def…"`, `'sk-' \` ⏎ `'proj…'`, `"glpat-" "…"`, `'a' . 'b'`, `"a" .. "b"`, `'a' \|\| 'b'` | each literal's contents become `[REDACTED]` when the joined text holds a secret |
/// | tokens broken over lines | `key sk-abcdefghij` ⏎ `klmnop…0123`, a key wrapped at a terminal's width, `AKIA…` ⏎ its secret, with indentation, quotes, `\` continuations, `#`/`//`/`>` on each line, or `\n` in a JSON string (the prefixes of the labelled formats, Stripe, GitLab, npm, PyPI and Discord) | each piece becomes `[REDACTED]` when the pieces joined hold a secret |
/// | base64 runs | the base64 of `AWS_SECRET_ACCESS_KEY=…`, of a PEM key (also wrapped at 76 columns), of a token | the whole run becomes `[BASE64-SECRET-REDACTED]` when it decodes to text holding a secret |
///
/// **gitleaks' rules** are its maintained rule set (MIT), kept as data in
/// the crate (`data/gitleaks/`) and loaded at first use: each rule runs
/// only on text that holds one of its keywords, replaces only its secret
/// group, and honours the rule's entropy floor and allowlists.
///
/// **Key/value pairs**: a key is secret when it ends in `password`,
/// `passwd`, `passphrase`, `secret`, `token`, `credential(s)`,
/// `authorization`, `cookie` or a `…key` such as `api_key`, `access_key`,
/// `private_key`, `secret_key`, `client_key`, in any case style and with
/// any prefix (`PGPASSWORD`, `dbPassword`, `AWS_SECRET_ACCESS_KEY`,
/// `x-api-key`, `spring.datasource.password`), or whose own word is
/// `pass`, `pwd`, `creds` or `auth` (`DB_PASS`, `dbPass`; not `bypass` or
/// `oauth`); a few endings may follow (`SECRET_KEY_BASE`, `password_hash`).
/// Keys for pagination or limits (`nextPageToken`, `max_tokens`) are not
/// secret. The value is what follows `:`, `=`, `=>`, `:=`: a quoted string
/// whole; after `:` (YAML, headers, prose) the rest of the line, up to a
/// comment or the next `key=`/`key:`; after a tight `=` (env lines, query
/// strings, connection strings) up to the next space, `&`, `;` or `,`.
/// Values that are clearly not secrets stay: empty, `null`, booleans,
/// placeholders (`${DB_PASSWORD}`, `{{ .token }}`, `<your-key>`, `***`),
/// values already redacted, and, when unquoted, code (`os.getenv("PW")`,
/// `self.password`, a type such as `&str` or `Option<String>`, a variable
/// named like the key), and a dependency's version requirement
/// (`"jsonwebtoken": "^9.0.2"`, `cookie = "0.6"`). In YAML, a value may
/// also stand on the lines below its key (`password:` ⏎ `  hunter2`, block
/// scalars `|`, `>-` with any indicators and a comment); a mapping, a
/// list, an alias or a tag below the key is not a value. A bare value after a quoted key is quoted
/// (`"password": 1234` becomes `"password": "[REDACTED]"`), so a JSON
/// result stays valid JSON. Patterns of your own join with
/// [`with_pattern`](Self::with_pattern).
///
/// # What is guaranteed
///
/// The patterns run over a *decoded view* of the text: every JSON string
/// literal in it (a whole JSON result, or JSON embedded in prose whose own
/// quotes pair up; literals are found left to right) that
/// contains escape sequences is decoded and written back with only the
/// escapes JSON requires (`\"`, `\\` and control characters). So a secret
/// written with `\uXXXX` escapes (`sk-\u0041bc…`, or a key whose every
/// character is escaped), with `\/` for `/`, or as surrogate pairs is
/// matched as the characters it stands for. Then:
///
/// - if no pattern matches the decoded view, [`redact`](Self::redact)
///   returns the text unchanged (borrowed, not even re-escaped);
/// - otherwise it returns the decoded view with every match replaced, in
///   pattern order (each pattern runs on the output of the one before).
///   For JSON input this is still valid JSON meaning the same thing apart
///   from the replaced parts: the built-in replacements never remove a
///   quote or cut an escape sequence in two, and add quotes only around
///   the `[REDACTED]` of a bare value after a quoted key;
/// - redacting the output again changes nothing.
///
/// Not covered: secrets escaped twice (`\\u0041`: a JSON document inside a
/// JSON string is matched only where its escaped quotes are the only
/// escapes), secrets split across values other than joined string literals
/// and tokens of a known prefix broken over lines (nor literals whose
/// quotes are escaped, as in code inside a JSON string), encoded twice or otherwise (`%41`, HTML entities; base64 runs
/// shorter than 16 or longer than 65,536 characters, or past the first
/// MiB decoded in one text), or in a format no pattern describes. A base64
/// run that decodes to text holding an e-mail address goes too. The redactor changes `tool_result`, the text the agent, the
/// `ToolUsageFinished` event and the logs get; `raw_tool_result` is never
/// changed, so a hook that reads it sees the secret.
///
/// # As a hook
///
/// Register [`hook`](Self::hook) at `POST_TOOL_CALL` before any hook that
/// copies the result somewhere (a log, an abort reason): hooks after it see
/// the redacted text. Registering it fail-closed withholds the result if
/// the redactor ever panicked. A hook runs after the events sent before
/// the POST chain: a call's arguments (`ToolUsageStarted`,
/// `ToolExecutionStarted`) and a failing tool's error (`ToolUsageError`,
/// `ToolFailureDetected`, sent as soon as the tool fails, as the reference
/// sends them). To keep secrets out of those too, give the crew the
/// redactor as its redaction (`CrewBuilder::redact_with`), which cleans
/// every exit of the crew.
///
/// ```
/// use crew_runtime::guards::{Regex, SecretRedactor};
/// use crew_runtime::prelude::*;
///
/// let redactor = SecretRedactor::new()
///     .with_pattern(Regex::new(r"\bEMP-\d{6}\b")?, "[EMPLOYEE-ID]");
/// assert_eq!(
///     redactor.redact("token=abc123 for ada@example.com (EMP-123456)"),
///     "token=[REDACTED] for [EMAIL-REDACTED] ([EMPLOYEE-ID])"
/// );
/// // JSON escapes do not hide a key.
/// assert_eq!(
///     redactor.redact(r#"{"key":"sk-\u0041bcdefghijklmnopqrstuvwxyz"}"#),
///     r#"{"key":"[OPENAI-KEY-REDACTED]"}"#
/// );
/// // Keys in any case style, passwords in URLs, gitleaks' token formats.
/// assert_eq!(
///     redactor.redact(r#"{"dbPassword": "correct horse", "url": "postgres://app:s3cr3t@db/app"}"#),
///     r#"{"dbPassword": "[REDACTED]", "url": "postgres://app:[REDACTED]@db/app"}"#
/// );
/// assert_eq!(
///     redactor.redact("export GITLAB_TOKEN=glpat-Xk3mP9qR2sT5vW8yZ1aB"),
///     "export GITLAB_TOKEN=[REDACTED]"
/// );
/// // A YAML value below its key, a token split in code, an env line in
/// // base64 (`PGPASSWORD=hunter2-correct-horse`).
/// assert_eq!(
///     redactor.redact("db:\n  password:\n    hunter2secret\n  host: db"),
///     "db:\n  password:\n    [REDACTED]\n  host: db"
/// );
/// assert_eq!(
///     redactor.redact(r#"t = "ghp_R2d2C3po" + "Bb8Kx9Lm4Np7Qr1St5Uv6Wx0YzAa""#),
///     r#"t = "[REDACTED]" + "[REDACTED]""#
/// );
/// // A key broken over two lines goes whole.
/// assert_eq!(
///     redactor.redact("key sk-abcdefghij\n  klmnopqrstuvwxyz0123"),
///     "key [REDACTED]\n  [REDACTED]"
/// );
/// assert_eq!(
///     redactor.redact("env: UEdQQVNTV09SRD1odW50ZXIyLWNvcnJlY3QtaG9yc2U="),
///     "env: [BASE64-SECRET-REDACTED]"
/// );
/// // A package named like a secret is a name.
/// assert!(matches!(
///     redactor.redact(r#""jsonwebtoken": "^9.0.2""#),
///     std::borrow::Cow::Borrowed(_)
/// ));
///
/// let registry = HookRegistry::new();
/// registry.register_hook_with(
///     POST_TOOL_CALL,
///     HookOptions::new().name("secret-redactor").fail_closed(),
///     redactor.hook(),
/// )?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct SecretRedactor {
    rules: Arc<Vec<Rule>>,
}

impl SecretRedactor {
    /// A redactor with every built-in pattern: the labelled formats,
    /// gitleaks' rules, key/value pairs and e-mail addresses.
    ///
    /// ```
    /// use crew_runtime::guards::SecretRedactor;
    ///
    /// let redactor = SecretRedactor::new();
    /// assert_eq!(
    ///     redactor.redact("PGPASSWORD=hunter2 psql -h db"),
    ///     "PGPASSWORD=[REDACTED] psql -h db"
    /// );
    /// ```
    pub fn new() -> Self {
        SecretRedactor {
            rules: Arc::clone(&BUILT_IN_RULES),
        }
    }

    /// A redactor with no pattern at all, for a set of your own.
    ///
    /// ```
    /// use crew_runtime::guards::{Regex, SecretRedactor};
    ///
    /// let redactor = SecretRedactor::empty().with_pattern(Regex::new(r"\d{4}-\d{4}")?, "[CARD]");
    /// assert_eq!(redactor.redact("card 1234-5678, password=x"), "card [CARD], password=x");
    /// # Ok::<(), regex::Error>(())
    /// ```
    pub fn empty() -> Self {
        SecretRedactor {
            rules: Arc::new(Vec::new()),
        }
    }

    /// Adds a pattern, run after the ones already there. `replacement` is a
    /// `regex` replacement template: `$1`, `${name}` refer to capture
    /// groups, `$$` is a dollar sign.
    ///
    /// ```
    /// use crew_runtime::guards::{Regex, SecretRedactor};
    ///
    /// let redactor = SecretRedactor::new()
    ///     .with_pattern(Regex::new(r"\b(?P<prefix>ACME-)\w+")?, "${prefix}***");
    /// assert_eq!(redactor.redact("licence ACME-9f8e7d"), "licence ACME-***");
    /// # Ok::<(), regex::Error>(())
    /// ```
    pub fn with_pattern(mut self, pattern: Regex, replacement: impl Into<String>) -> Self {
        Arc::make_mut(&mut self.rules).push(Rule::template(pattern, replacement));
        self
    }

    /// How many patterns run (each of gitleaks' rules counts as one).
    ///
    /// ```
    /// use crew_runtime::guards::SecretRedactor;
    ///
    /// assert_eq!(SecretRedactor::empty().pattern_count(), 0);
    /// assert!(SecretRedactor::new().pattern_count() > 200);
    /// ```
    pub fn pattern_count(&self) -> usize {
        self.rules.iter().map(Rule::pattern_count).sum()
    }

    /// The text with every secret replaced; borrowed when there was none.
    /// See [the type's documentation](Self) for exactly what is matched.
    ///
    /// ```
    /// use std::borrow::Cow;
    /// use crew_runtime::guards::SecretRedactor;
    ///
    /// let redactor = SecretRedactor::new();
    /// assert!(matches!(redactor.redact("build 4f2a9c1 passed"), Cow::Borrowed(_)));
    /// assert_eq!(
    ///     redactor.redact("Authorization: Basic YWRhOmh1bnRlcjI="),
    ///     "Authorization: Basic [REDACTED]"
    /// );
    /// ```
    pub fn redact<'t>(&self, text: &'t str) -> Cow<'t, str> {
        let mut current = json::decode_string_literals(text);
        // Each rule writes into `spare` only when it changes something;
        // then the two swap, so one call allocates two buffers at most.
        let mut spare = String::new();
        let mut changed = false;
        for rule in self.rules.iter() {
            if rule.apply(&current, &mut spare) {
                let previous =
                    std::mem::replace(&mut current, Cow::Owned(std::mem::take(&mut spare)));
                if let Cow::Owned(buffer) = previous {
                    spare = buffer;
                }
                changed = true;
            }
        }
        if changed {
            Cow::Owned(current.into_owned())
        } else {
            Cow::Borrowed(text)
        }
    }

    /// A `POST_TOOL_CALL` hook that replaces `tool_result` with its redacted
    /// form (and keeps it when there was nothing to redact).
    ///
    /// ```
    /// use crew_runtime::guards::SecretRedactor;
    /// use crew_runtime::prelude::*;
    ///
    /// let registry = HookRegistry::new();
    /// registry.register_hook(POST_TOOL_CALL, SecretRedactor::new().hook())?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn hook(
        &self,
    ) -> impl Fn(&mut ToolCallHookContext) -> Option<String> + Send + Sync + 'static {
        let redactor = self.clone();
        move |ctx: &mut ToolCallHookContext| match redactor.redact(ctx.tool_result.as_deref()?) {
            Cow::Owned(redacted) => Some(redacted),
            Cow::Borrowed(_) => None,
        }
    }
}

/// The redactor as a crew's redaction
/// ([`CrewBuilder::redact_with`](crate::CrewBuilder::redact_with)): the
/// same as [`SecretRedactor::redact`].
///
/// ```
/// use crew_runtime::guards::SecretRedactor;
/// use crew_runtime::Redact;
///
/// let redactor: &dyn Redact = &SecretRedactor::new();
/// assert_eq!(redactor.redact("PGPASSWORD=hunter2"), "PGPASSWORD=[REDACTED]");
/// ```
impl Redact for SecretRedactor {
    fn redact<'t>(&self, text: &'t str) -> Cow<'t, str> {
        SecretRedactor::redact(self, text)
    }
}

impl Default for SecretRedactor {
    fn default() -> Self {
        SecretRedactor::new()
    }
}

impl fmt::Debug for SecretRedactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let patterns: Vec<String> = self
            .rules
            .iter()
            .map(|rule| match rule {
                Rule::Template { regex, .. } => regex.as_str().to_owned(),
                Rule::Checked(rule) => rule.regex.as_str().to_owned(),
                Rule::Gitleaks(rules) => rules.summary(),
                Rule::Whole { name, .. } => (*name).to_owned(),
            })
            .collect();
        f.debug_struct("SecretRedactor")
            .field("patterns", &patterns)
            .finish()
    }
}

#[cfg(test)]
mod tests;
