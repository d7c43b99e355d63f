//! The observation: what the model, the events and the console get of a
//! call's result once the POST chain is done with it. Cleaned by the
//! crew's redaction once, then cut to the crew's `max_observation_bytes`
//! (a cut through a secret could hide it from the redaction).

use std::fmt::Write as _;

use hooks_core::runtime::ToolCallReport;

use crate::run::context::RunContext;

/// The report with its observation cleaned, then cut.
pub(super) fn observation(cx: &RunContext, mut report: ToolCallReport) -> ToolCallReport {
    let observation = std::mem::take(&mut report.observation);
    let cleaned = cx.redaction().owned(observation);
    report.observation = truncate(cleaned, cx.settings().max_observation_bytes);
    report
}

/// `text` cut to at most `limit` bytes on a character boundary, followed
/// by a line saying how much was cut; unchanged when it fits.
fn truncate(mut text: String, limit: usize) -> String {
    if text.len() <= limit {
        return text;
    }
    let total = text.len();
    let mut cut = limit;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    text.truncate(cut);
    let _ = write!(
        text,
        "\n[observation truncated: {} of {total} bytes cut, past the limit of {limit} bytes]",
        total - cut
    );
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_keeps_whole_characters_and_says_how_much_was_cut() {
        assert_eq!(truncate("abc".to_owned(), 3), "abc");
        assert_eq!(
            truncate("aéb".to_owned(), 2),
            "a\n[observation truncated: 3 of 4 bytes cut, past the limit of 2 bytes]"
        );
        assert!(truncate("é".to_owned(), 0).starts_with("\n[observation truncated"));
    }
}
