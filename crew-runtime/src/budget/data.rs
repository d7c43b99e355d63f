//! Budgets declared as data (TOML or JSON), checked on load: a mistake is
//! refused with its line and column, and a misspelled name with the one
//! meant.

use std::fmt;
use std::time::Duration;

use serde::Deserialize;

use super::{Budget, Per, Window};

/// A file of budgets: `[[budget]]` tables in TOML, or
/// `{"budget": [...]}` in JSON.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    budget: Vec<Entry>,
}

/// What a budget counts, as written.
#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum Counts {
    ModelCalls,
    ToolCalls,
    Tokens,
    PromptTokens,
    CompletionTokens,
    Money,
}

/// What a budget counts per, as written.
#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum PerEntry {
    Kickoff,
    Crew,
    User,
    Tenant,
}

/// What a budget does while its counters cannot be reached.
#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum Unavailable {
    Refuse,
    Allow,
}

/// What a refused tool call does, as written.
#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum Refused {
    Block,
    EndKickoff,
}

/// One budget, as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    name: String,
    counts: Counts,
    limit: u64,
    #[serde(default)]
    tools: Vec<String>,
    #[serde(default)]
    capabilities: Vec<CapabilityEntry>,
    per: Option<PerEntry>,
    window: Option<WindowEntry>,
    on_unavailable: Option<Unavailable>,
    on_refused: Option<Refused>,
}

/// A capability as written (`read_only`, `destructive`, `idempotent`,
/// `open_world`).
struct CapabilityEntry(hooks_core::Capability);

impl<'de> Deserialize<'de> for CapabilityEntry {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        hooks_core::Capability::from_name(&text)
            .map(CapabilityEntry)
            .ok_or_else(|| {
                serde::de::Error::unknown_variant(
                    &text,
                    &["read_only", "destructive", "idempotent", "open_world"],
                )
            })
    }
}

/// A window as written, read by [`window`]: a mistake is the parser's
/// error, at the value's place.
struct WindowEntry(Window);

impl<'de> Deserialize<'de> for WindowEntry {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        window(&text)
            .map(WindowEntry)
            .map_err(serde::de::Error::custom)
    }
}

/// Every name a budgets file may use, for "did you mean".
const NAMES: &[&str] = &[
    "budget",
    "name",
    "counts",
    "limit",
    "tools",
    "capabilities",
    "read_only",
    "destructive",
    "idempotent",
    "open_world",
    "per",
    "window",
    "on_unavailable",
    "on_refused",
    "block",
    "end_kickoff",
    "model_calls",
    "tool_calls",
    "tokens",
    "prompt_tokens",
    "completion_tokens",
    "money",
    "kickoff",
    "crew",
    "user",
    "tenant",
    "refuse",
    "allow",
];

/// A budgets file that cannot be loaded: where, and what is wrong.
///
/// ```
/// use crew_runtime::budget::Budget;
///
/// let error = Budget::from_toml("[[budget]]\nname = \"calls\"\ncounts = \"tool_calls\"\nlimt = 5\n").unwrap_err();
/// assert_eq!((error.line, error.column), (4, 1));
/// assert!(error.to_string().contains("did you mean `limit`?"), "{error}");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BudgetsFileError {
    /// The line (from 1), 0 when the parser said none.
    pub line: usize,
    /// The column (from 1, in characters), 0 when the parser said none.
    pub column: usize,
    /// What is wrong, with the name meant when a name is misspelled.
    pub message: String,
}

impl std::error::Error for BudgetsFileError {}

impl fmt::Display for BudgetsFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "budgets: {}", self.message)
        } else {
            write!(
                f,
                "budgets, line {}, column {}: {}",
                self.line, self.column, self.message
            )
        }
    }
}

/// `message` with the name of `names` meant, when it names an unknown
/// field or value (serde's words: "unknown field `limt`", "unknown
/// variant `x`").
fn with_suggestion(message: &str, names: &[&str]) -> String {
    let message = message.trim().to_owned();
    let unknown = ["unknown field `", "unknown variant `"]
        .iter()
        .find_map(|start| message.split_once(start))
        .and_then(|(_, rest)| rest.split_once('`'))
        .map(|(name, _)| name.to_owned());
    let Some(unknown) = unknown else {
        return message;
    };
    let known = names.iter().map(|name| (*name).to_owned()).collect();
    match crate::check::closest(&unknown, &known) {
        Some(name) => format!("{message}; did you mean `{name}`?"),
        None => message,
    }
}

/// `text` read as TOML into a `T`, or the parser's error at its place,
/// with the one of `names` meant when it names an unknown one.
pub(super) fn from_toml<T: serde::de::DeserializeOwned>(
    text: &str,
    names: &[&str],
) -> Result<T, BudgetsFileError> {
    toml::from_str(text).map_err(|error| {
        let (line, column) = error
            .span()
            .map_or((0, 0), |span| crate::check::line_column(text, span.start));
        BudgetsFileError {
            line,
            column,
            message: with_suggestion(error.message(), names),
        }
    })
}

/// A window as written: `lifetime`, `day` (the calendar day, UTC), or a
/// rolling window (`90s`, `15m`, `1h`, `7d`).
fn window(text: &str) -> Result<Window, String> {
    match text {
        "lifetime" => return Ok(Window::Lifetime),
        "day" => return Ok(Window::DayUtc),
        _ => {}
    }
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        _ => 0,
    };
    match number.parse::<u64>() {
        Ok(number) if seconds > 0 && number > 0 => Ok(Window::Rolling(Duration::from_secs(
            number.saturating_mul(seconds),
        ))),
        _ => Err(format!(
            "window `{text}` is not `lifetime`, `day`, or a rolling window such as `90s`, `15m`, `1h` or `7d`"
        )),
    }
}

impl Entry {
    fn budget(self) -> Budget {
        let mut budget = match self.counts {
            Counts::ModelCalls => Budget::model_calls(self.name, self.limit),
            Counts::ToolCalls => Budget::tool_calls(self.name, self.limit),
            Counts::Tokens => Budget::tokens(self.name, self.limit),
            Counts::PromptTokens => Budget::prompt_tokens(self.name, self.limit),
            Counts::CompletionTokens => Budget::completion_tokens(self.name, self.limit),
            Counts::Money => Budget::money(self.name, self.limit),
        };
        if !self.tools.is_empty() {
            budget = budget.tools(self.tools);
        }
        if !self.capabilities.is_empty() {
            budget = budget.capabilities(self.capabilities.into_iter().map(|entry| entry.0));
        }
        budget = budget.per(match self.per {
            None | Some(PerEntry::Kickoff) => Per::Kickoff,
            Some(PerEntry::Crew) => Per::Crew,
            Some(PerEntry::User) => Per::User,
            Some(PerEntry::Tenant) => Per::Tenant,
        });
        if let Some(WindowEntry(window)) = self.window {
            budget = budget.window(window);
        }
        if matches!(self.on_unavailable, Some(Unavailable::Allow)) {
            budget = budget.allow_when_unavailable();
        }
        if matches!(self.on_refused, Some(Refused::EndKickoff)) {
            budget = budget.end_kickoff_when_refused();
        }
        budget
    }
}

impl Budget {
    /// The budgets of a TOML text: `[[budget]]` tables with `name`,
    /// `counts` (`model_calls`, `tool_calls`, `tokens`, `prompt_tokens`,
    /// `completion_tokens`, or `money` in millionths of the prices'
    /// currency unit), `limit`, and
    /// optionally `tools`, `capabilities` (`read_only`, `destructive`,
    /// `idempotent`, `open_world`), `per` (`kickoff`, `crew`, `user` or
    /// `tenant`), `window`
    /// (`lifetime`, `day`, or a rolling `90s`, `15m`, `1h`, `7d`),
    /// `on_unavailable` (`refuse` or `allow`) and `on_refused` (`block` or
    /// `end_kickoff`, for a tool call). Checked whole: a field or
    /// value misspelled, missing or of the wrong type is refused with its
    /// line and column (and, for a name, the one meant). Names of tools
    /// are checked against the crew's at its build.
    ///
    /// ```
    /// use crew_runtime::budget::{Budget, Per, Window};
    ///
    /// let budgets = Budget::from_toml(r#"
    ///     [[budget]]
    ///     name = "searches"
    ///     counts = "tool_calls"
    ///     tools = ["web_search"]
    ///     limit = 20
    ///     per = "user"
    ///     window = "1h"
    ///
    ///     [[budget]]
    ///     name = "tokens"
    ///     counts = "tokens"
    ///     limit = 200000
    /// "#)?;
    /// assert_eq!(budgets[0].per_of(), Per::User);
    /// assert_eq!(budgets[0].window_of(), Window::Rolling(std::time::Duration::from_secs(3_600)));
    /// assert_eq!(budgets[1].limit(), 200_000);
    /// # Ok::<(), crew_runtime::budget::BudgetsFileError>(())
    /// ```
    pub fn from_toml(text: &str) -> Result<Vec<Budget>, BudgetsFileError> {
        let file: File = from_toml(text, NAMES)?;
        Ok(file.budget.into_iter().map(Entry::budget).collect())
    }

    /// The budgets of a JSON text: `{"budget": [{...}, ...]}`, each as in
    /// [`Budget::from_toml`], checked the same way.
    ///
    /// ```
    /// use crew_runtime::budget::Budget;
    ///
    /// let budgets = Budget::from_json(r#"{"budget": [{"name": "turns", "counts": "model_calls", "limit": 40}]}"#)?;
    /// assert_eq!(budgets[0].name(), "turns");
    /// let error = Budget::from_json(r#"{"budget": [{"name": "turns", "counts": "model_cals", "limit": 40}]}"#).unwrap_err();
    /// assert!(error.to_string().contains("did you mean `model_calls`?"), "{error}");
    /// assert_eq!(error.line, 1);
    /// # Ok::<(), crew_runtime::budget::BudgetsFileError>(())
    /// ```
    pub fn from_json(text: &str) -> Result<Vec<Budget>, BudgetsFileError> {
        let file: File = serde_json::from_str(text).map_err(|error| {
            // serde_json's message ends with its own " at line L column C".
            let message = error.to_string();
            let message = message
                .rsplit_once(" at line ")
                .map_or(message.as_str(), |(message, _)| message);
            BudgetsFileError {
                line: error.line(),
                column: error.column(),
                message: with_suggestion(message, NAMES),
            }
        })?;
        Ok(file.budget.into_iter().map(Entry::budget).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_count_lines_and_characters_from_one() {
        let text = "a\nbé c\n";
        let place = crate::check::line_column;
        assert_eq!(place(text, 0), (1, 1));
        assert_eq!(place(text, 2), (2, 1));
        assert_eq!(place(text, 6), (2, 4));
        assert_eq!(place(text, 999), (3, 1));
    }

    #[test]
    fn windows_as_written() {
        assert_eq!(window("lifetime"), Ok(Window::Lifetime));
        assert_eq!(window("day"), Ok(Window::DayUtc));
        assert_eq!(window("15m"), Ok(Window::Rolling(Duration::from_secs(900))));
        for bad in ["", "0h", "h", "15", "1w", "-1h", "1.5h"] {
            assert!(window(bad).is_err(), "{bad}");
        }
    }
}
