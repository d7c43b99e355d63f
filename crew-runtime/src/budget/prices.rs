//! What model tokens cost, for money budgets: a table per model, shipped
//! as data for the providers the runtime speaks to, and overridable.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use serde::Deserialize;

use super::BudgetsFileError;
use super::data::from_toml;

/// The table shipped with the runtime (`prices.toml` beside this file).
const BUILTIN: &str = include_str!("prices.toml");

/// What one model's tokens cost, in millionths of the currency unit
/// (micro-dollars for the shipped table) per million tokens.
///
/// ```
/// use crew_runtime::budget::Price;
///
/// // $3 and $15 per million tokens in and out.
/// let price = Price::per_million(3.0, 15.0);
/// // 1 000 tokens in, 200 out: $0.003 + $0.003, in micro-dollars.
/// assert_eq!(price.cost(1_000, 200), 6_000);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Price {
    /// A prompt token, per million, in millionths.
    input: u64,
    /// An answer token, per million, in millionths.
    output: u64,
}

impl Price {
    /// A price of `input` and `output` currency units per million tokens
    /// (a negative or non-finite price counts as zero).
    pub fn per_million(input: f64, output: f64) -> Price {
        Price {
            input: micros(input),
            output: micros(output),
        }
    }

    /// What `prompt` tokens in and `answer` tokens out cost, in millionths
    /// of the currency unit, rounded up.
    pub fn cost(&self, prompt: u64, answer: u64) -> u64 {
        let millionths = u128::from(prompt)
            .saturating_mul(u128::from(self.input))
            .saturating_add(u128::from(answer).saturating_mul(u128::from(self.output)));
        u64::try_from(millionths.div_ceil(1_000_000)).unwrap_or(u64::MAX)
    }
}

/// Millionths of `units`, rounded up (a negative or non-finite price is
/// zero).
fn micros(units: f64) -> u64 {
    if !units.is_finite() || units <= 0.0 {
        return 0;
    }
    let millionths = (units * 1_000_000.0).ceil();
    if millionths >= u64::MAX as f64 {
        u64::MAX
    } else {
        // Finite, positive, below u64::MAX: the cast keeps it.
        millionths as u64
    }
}

/// A table of prices by model name. A model's name matches an entry when
/// it is the entry's name, or the entry's name followed by `-` and more (a
/// dated snapshot); the longest entry matching wins.
///
/// ```
/// use crew_runtime::budget::{Price, Prices};
///
/// let prices = Prices::builtin().with("my-finetune", Price::per_million(4.0, 16.0));
/// assert!(prices.price("claude-sonnet-4-5-20250929").is_some());
/// assert_eq!(prices.price("my-finetune"), Some(Price::per_million(4.0, 16.0)));
/// assert_eq!(prices.price("unknown-model"), None);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prices {
    models: Arc<BTreeMap<String, Price>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    model: BTreeMap<String, Entry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    input: f64,
    output: f64,
    #[serde(default)]
    #[allow(dead_code, reason = "read for a settlement that knows cached tokens")]
    cached_input: Option<f64>,
}

/// The names a prices file may use, for "did you mean".
const NAMES: &[&str] = &["model", "input", "output", "cached_input"];

impl Prices {
    /// The table shipped with the runtime: list prices, in US dollars per
    /// million tokens, of the Anthropic and OpenAI models its clients
    /// speak to. Prices change: override what differs.
    pub fn builtin() -> Prices {
        static BUILT: OnceLock<Prices> = OnceLock::new();
        BUILT
            .get_or_init(|| {
                // Checked by a test: the shipped text always loads.
                Prices::from_toml(BUILTIN).unwrap_or_else(|_| Prices::empty())
            })
            .clone()
    }

    /// A table with no model in it.
    ///
    /// ```
    /// assert_eq!(crew_runtime::budget::Prices::empty().price("gpt-4o"), None);
    /// ```
    pub fn empty() -> Prices {
        Prices {
            models: Arc::new(BTreeMap::new()),
        }
    }

    /// A table read from TOML: `[model."NAME"]` tables of `input`,
    /// `output` and optionally `cached_input`, in currency units per
    /// million tokens. Refused with line, column and the name meant.
    ///
    /// ```
    /// use crew_runtime::budget::Prices;
    ///
    /// let prices = Prices::from_toml("[model.\"llama-3.3-70b\"]\ninput = 0.6\noutput = 0.6\n")?;
    /// assert_eq!(prices.price("llama-3.3-70b").map(|p| p.cost(1_000_000, 0)), Some(600_000));
    /// let error = Prices::from_toml("[model.\"x\"]\ninput = 1.0\noutptu = 2.0\n").unwrap_err();
    /// assert!(error.to_string().contains("did you mean `output`?"), "{error}");
    /// # Ok::<(), crew_runtime::budget::BudgetsFileError>(())
    /// ```
    pub fn from_toml(text: &str) -> Result<Prices, BudgetsFileError> {
        let file: File = from_toml(text, NAMES)?;
        Ok(Prices {
            models: Arc::new(
                file.model
                    .into_iter()
                    .map(|(name, entry)| (name, Price::per_million(entry.input, entry.output)))
                    .collect(),
            ),
        })
    }

    /// The table with `model` priced at `price` (replacing its entry).
    pub fn with(self, model: impl Into<String>, price: Price) -> Prices {
        let mut models = (*self.models).clone();
        models.insert(model.into(), price);
        Prices {
            models: Arc::new(models),
        }
    }

    /// The price of `model`, if the table has one.
    pub fn price(&self, model: &str) -> Option<Price> {
        self.models
            .iter()
            .filter(|(name, _)| {
                model == name.as_str()
                    || model
                        .strip_prefix(name.as_str())
                        .is_some_and(|rest| rest.starts_with('-'))
            })
            .max_by_key(|(name, _)| name.len())
            .map(|(_, price)| *price)
    }
}

impl Default for Prices {
    fn default() -> Self {
        Prices::builtin()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_table_loads_and_prices_every_model_it_names() {
        let file: File = toml::from_str(BUILTIN).expect("the shipped prices load");
        assert!(file.model.len() >= 10);
        let prices = Prices::builtin();
        for (name, entry) in &file.model {
            assert!(entry.input > 0.0 && entry.output >= entry.input, "{name}");
            assert!(prices.price(name).is_some(), "{name}");
        }
    }

    #[test]
    fn the_longest_entry_a_name_starts_with_wins() {
        let prices = Prices::builtin();
        // `gpt-4o-mini` is not `gpt-4o` with a suffix of its own.
        assert_eq!(
            prices.price("gpt-4o-mini-2024-07-18"),
            prices.price("gpt-4o-mini")
        );
        assert_ne!(prices.price("gpt-4o-mini"), prices.price("gpt-4o"));
        assert_eq!(prices.price("gpt-4o2"), None);
    }

    #[test]
    fn costs_round_up_and_never_overflow() {
        let price = Price::per_million(0.15, 0.6);
        assert_eq!(price.cost(1, 0), 1);
        assert_eq!(price.cost(0, 0), 0);
        assert_eq!(Price::per_million(f64::NAN, -1.0).cost(10, 10), 0);
        assert_eq!(
            Price::per_million(1e30, 1e30).cost(u64::MAX, u64::MAX),
            u64::MAX
        );
    }
}
