//! Kickoff inputs and the `{placeholder}`s they fill in.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Display;

/// The inputs of a kickoff: values for the `{placeholder}`s in task
/// descriptions and expected outputs.
///
/// ```
/// use hooks_core::Inputs;
///
/// let inputs = Inputs::from([("topic", "Rust"), ("year", "2024")]);
/// assert_eq!(inputs.get("topic"), Some("Rust"));
/// let more = Inputs::new().with("topic", "Rust").with("count", 5);
/// assert_eq!(more.get("count"), Some("5"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Inputs {
    values: BTreeMap<String, String>,
}

impl Inputs {
    /// No inputs.
    pub fn new() -> Self {
        Inputs::default()
    }

    /// Adds (or replaces) an input.
    pub fn with(mut self, name: impl Into<String>, value: impl Display) -> Self {
        self.insert(name, value);
        self
    }

    /// Adds (or replaces) an input.
    pub fn insert(&mut self, name: impl Into<String>, value: impl Display) {
        self.values.insert(name.into(), value.to_string());
    }

    /// The value of an input.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    /// The names of the inputs, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.values.keys().map(String::as_str)
    }

    /// Every input as `(name, value)`, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.values.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Removes an input; returns its value if it was there.
    pub fn remove(&mut self, name: &str) -> Option<String> {
        self.values.remove(name)
    }

    /// How many inputs there are.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether there are no inputs.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Fills the `{name}` placeholders of `template`; names without a value
    /// are left as they are and pushed to `missing` (once each).
    ///
    /// A placeholder is `{` + a name of ASCII letters, digits, `_` or `-`
    /// (not starting with a digit or `-`) + `}`. Other braces, such as JSON
    /// in a description, are left alone.
    ///
    /// ```
    /// use hooks_core::Inputs;
    /// let mut missing = Vec::new();
    /// let text = Inputs::from([("topic", "Rust")]).interpolate("{topic} {year}", &mut missing);
    /// assert_eq!((text.as_str(), missing), ("Rust {year}", vec!["year".to_owned()]));
    /// ```
    pub fn interpolate(&self, template: &str, missing: &mut Vec<String>) -> String {
        let mut out = String::with_capacity(template.len());
        let mut rest = template;
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..open]);
            let after = &rest[open + 1..];
            match placeholder_name(after) {
                Some(name) => {
                    match self.values.get(name) {
                        Some(value) => out.push_str(value),
                        None => {
                            if !missing.iter().any(|m| m == name) {
                                missing.push(name.to_owned());
                            }
                            out.push('{');
                            out.push_str(name);
                            out.push('}');
                        }
                    }
                    rest = &after[name.len() + 1..];
                }
                None => {
                    out.push('{');
                    rest = after;
                }
            }
        }
        out.push_str(rest);
        out
    }
}

/// The placeholder name at the start of `text` (just after a `{`), if
/// `text` starts with a valid name followed by `}`.
fn placeholder_name(text: &str) -> Option<&str> {
    let end = text.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))?;
    let name = &text[..end];
    let first = name.chars().next()?;
    let valid_start = first.is_ascii_alphabetic() || first == '_';
    (valid_start && text[end..].starts_with('}')).then_some(name)
}

impl From<()> for Inputs {
    fn from((): ()) -> Self {
        Inputs::new()
    }
}

impl<K: Into<String>, V: Display, const N: usize> From<[(K, V); N]> for Inputs {
    fn from(pairs: [(K, V); N]) -> Self {
        pairs.into_iter().collect()
    }
}

impl<K: Into<String>, V: Display> From<Vec<(K, V)>> for Inputs {
    fn from(pairs: Vec<(K, V)>) -> Self {
        pairs.into_iter().collect()
    }
}

impl<K: Into<String>, V: Display, S> From<HashMap<K, V, S>> for Inputs {
    fn from(map: HashMap<K, V, S>) -> Self {
        map.into_iter().collect()
    }
}

impl<K: Into<String>, V: Display> From<BTreeMap<K, V>> for Inputs {
    fn from(map: BTreeMap<K, V>) -> Self {
        map.into_iter().collect()
    }
}

impl<K: Into<String>, V: Display> FromIterator<(K, V)> for Inputs {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(pairs: I) -> Self {
        let mut inputs = Inputs::new();
        for (name, value) in pairs {
            inputs.insert(name, value);
        }
        inputs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fill(template: &str, inputs: &Inputs) -> (String, Vec<String>) {
        let mut missing = Vec::new();
        let text = inputs.interpolate(template, &mut missing);
        (text, missing)
    }

    #[test]
    fn fills_known_placeholders() {
        let inputs = Inputs::from([("topic", "Rust"), ("n", "3")]);
        let (text, missing) = fill("{n} facts on {topic}, then {topic} again", &inputs);
        assert_eq!(text, "3 facts on Rust, then Rust again");
        assert!(missing.is_empty());
    }

    #[test]
    fn reports_each_missing_name_once() {
        let (text, missing) = fill("{a} {b} {a}", &Inputs::from([("b", "x")]));
        assert_eq!(text, "{a} x {a}");
        assert_eq!(missing, ["a"]);
    }

    #[test]
    fn leaves_other_braces_alone() {
        let inputs = Inputs::from([("k", "v")]);
        let (text, missing) = fill(r#"{"json": {k}} {} {1x} {k } {"#, &inputs);
        assert_eq!(text, r#"{"json": v} {} {1x} {k } {"#);
        assert!(missing.is_empty());
    }

    #[test]
    fn non_ascii_text_survives() {
        let inputs = Inputs::from([("nom", "café")]);
        assert_eq!(fill("é {nom} ü {", &inputs).0, "é café ü {");
    }
}
