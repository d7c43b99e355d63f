//! What an approval binds: the arguments a person approved, checked again
//! by every PRE guard of the call when the person edited them, and told
//! back to the source what became of the call.
//!
//! Three rules of an approved call live here:
//!
//! - An edit is merged back onto the real arguments by JSON path: the
//!   person saw the redacted arguments, so a value left as shown gets its
//!   real (unredacted) value back, and an edit that changed a value holding
//!   a redaction placeholder, or that writes a placeholder anywhere, is
//!   refused. A placeholder never reaches a tool.
//! - An approved edit goes through the call's PRE chain again, once (the
//!   dispatch runs that round): an ask met on it is answered at once when
//!   it asks about exactly the arguments just approved; a different ask
//!   goes to a person again, with the approver who edited as its
//!   requester (they cannot approve their own edit twice); a guard that
//!   changes the approved arguments refuses the edit.
//! - Whatever the call then does (runs, fails, is refused by a later
//!   guard) is told to the source that asked
//!   ([`HumanInputSource::settled`]), so a person who approved it can see
//!   what their approval led to.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Map, Value};

use crate::human::{
    ApprovedCallOutcome, HumanAnswer, HumanInputError, HumanInputFuture, HumanInputRequest,
    HumanInputSource,
};

/// The `source` of the refusal of an approved edit that a PRE guard
/// changed on its second round.
///
/// ```
/// assert_eq!(hooks_core::APPROVAL_RECHECK_SOURCE, "approval-recheck");
/// ```
pub const APPROVAL_RECHECK_SOURCE: &str = "approval-recheck";

/// The answers one call got, kept by its context from the first
/// `request_approval` on (a call that asks nothing allocates nothing).
#[derive(Default)]
pub(crate) struct Ledger {
    answers: Mutex<Vec<Answered>>,
}

/// One answer, and where to tell what became of its call.
struct Answered {
    source: Option<Arc<dyn HumanInputSource>>,
    /// The hook that asked (its entry's address while the call runs).
    asker: usize,
    /// The arguments it asked about, unredacted.
    asked: Map<String, Value>,
    /// The answer, an edit merged onto the real arguments.
    answer: HumanAnswer,
    /// Its edit went through the second round already.
    rechecked: bool,
}

impl Ledger {
    /// Keeps `answer`, given by `source` to the hook `asker` about
    /// `asked`.
    pub(crate) fn record(
        &self,
        source: Option<Arc<dyn HumanInputSource>>,
        asker: usize,
        asked: Map<String, Value>,
        answer: &HumanAnswer,
    ) {
        let answered = Answered {
            source,
            asker,
            asked,
            answer: answer.clone(),
            rechecked: false,
        };
        self.lock().push(answered);
    }

    /// The arguments of the last edit not yet checked again (every
    /// earlier one counts as checked too: the call runs with one set of
    /// arguments).
    pub(crate) fn edit_to_recheck(&self) -> Option<Map<String, Value>> {
        let mut answers = self.lock();
        let mut found = None;
        for answered in answers.iter_mut().filter(|answered| !answered.rechecked) {
            answered.rechecked = true;
            if let Some(edit) = &answered.answer.edited_input {
                found = Some(edit.clone());
            }
        }
        found
    }

    /// Who edited this call's arguments last, if anybody did: the
    /// requester of every later question about it.
    pub(crate) fn editor(&self) -> Option<String> {
        self.lock()
            .iter()
            .rev()
            .find(|answered| answered.answer.edited_input.is_some())
            .and_then(|answered| answered.answer.answered_by.clone())
    }

    /// The answer hook `asker` already got about exactly `input`: the
    /// same question, asked again on the second round of an edit.
    pub(crate) fn answered(&self, asker: usize, input: &Map<String, Value>) -> Option<HumanAnswer> {
        self.lock()
            .iter()
            .rev()
            .filter(|answered| answered.asker == asker)
            .find(|answered| match &answered.answer.edited_input {
                Some(edit) => edit == input,
                None => &answered.asked == input,
            })
            .map(|answered| answered.answer.clone())
    }

    /// Tells every source that asked about this call what became of it.
    pub(crate) fn settle(&self, outcome: &ApprovedCallOutcome) {
        let answers = std::mem::take(&mut *self.lock());
        for answered in answers {
            if let (Some(source), Some(id)) = (&answered.source, &answered.answer.question_id) {
                tell(source.as_ref(), id, outcome);
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Answered>> {
        // A panic while the list was held left it whole (pushes and
        // flag writes only): keep using it.
        self.answers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Tells `source` the outcome of question `id`, containing a panic of the
/// source (what it does with the news is its own affair).
pub(crate) fn tell(source: &dyn HumanInputSource, id: &str, outcome: &ApprovedCallOutcome) {
    let told = crate::contain::contain_panic(std::panic::AssertUnwindSafe(|| {
        source.settled(id, outcome);
    }));
    if let Err(panic) = told {
        crate::panic::drop_payload(panic);
    }
}

/// Like [`ask`](crate::human::ask), with the whole answer: what approvals read.
///
/// The person sees the arguments redacted; an edit of theirs is merged
/// back onto the real ones here, in the process that holds the call (see
/// the module's doc), and refused when it touched a redacted value. The
/// answer is kept in `ledger`, so that the call's dispatch can check an
/// edit again and tell the source what became of the call.
pub(crate) fn ask_for_answer(
    source: Option<Arc<dyn HumanInputSource>>,
    request: HumanInputRequest,
    timeout: Duration,
    ledger: Option<(Arc<Ledger>, usize)>,
    gate: Option<crate::GateFuture>,
) -> HumanInputFuture<HumanAnswer> {
    let asked = request.tool_input.clone();
    // What the person is shown: cleaned by the crew's redaction in scope.
    let request = request.redacted_in_scope();
    let shown = request.tool_input.clone();
    let told = source.clone();
    let answer = crate::human::answering(source, request, timeout);
    HumanInputFuture::new(async move {
        // The gate kept first: a question it could not keep is not asked.
        if let Some(gate) = gate {
            gate.await?;
        }
        let mut answer = answer.await?;
        if let Some(edit) = answer.edited_input.take() {
            match merge_edit(asked.as_ref(), shown.as_ref(), edit) {
                Ok(merged) => answer.edited_input = Some(merged),
                Err(problem) => {
                    if let (Some(source), Some(id)) = (&told, &answer.question_id) {
                        let outcome = ApprovedCallOutcome::Refused {
                            source: APPROVAL_RECHECK_SOURCE.to_owned(),
                            reason: problem.clone(),
                        };
                        tell(source.as_ref(), id, &outcome);
                    }
                    return Err(HumanInputError::SourceFailed(format!(
                        "the approved edit cannot be applied: {problem}"
                    )));
                }
            }
        }
        if let Some((ledger, asker)) = ledger {
            let asked = match asked {
                Some(Value::Object(asked)) => asked,
                _ => serde_json::Map::new(),
            };
            ledger.record(told, asker, asked, &answer);
        }
        Ok(answer)
    })
}

/// Whether `text` holds a redaction placeholder as the crew's redactors
/// write them (`[REDACTED]`, `[GITHUB-TOKEN-REDACTED]`, …).
pub(crate) fn holds_placeholder(text: &str) -> bool {
    let mut rest = text;
    while let Some(end) = rest.find("REDACTED]") {
        let before = &rest[..end];
        if let Some(open) = before.rfind('[') {
            let name = &before[open + 1..];
            if name
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '-' || c == '_')
            {
                return true;
            }
        }
        rest = &rest[end + "REDACTED]".len()..];
    }
    false
}

/// Merges a person's `edit` of the arguments they were `shown` (the
/// redacted form of `asked`) back onto `asked`, path by path: a value the
/// edit leaves as shown takes its real value back. Refuses an edit that
/// changed a value that was redacted, or that writes a placeholder
/// anywhere else, naming the path.
///
/// `asked` and `shown` are equal when nothing was redacted: the edit is
/// then taken as it is, placeholders refused all the same.
pub(crate) fn merge_edit(
    asked: Option<&Value>,
    shown: Option<&Value>,
    edit: Map<String, Value>,
) -> Result<Map<String, Value>, String> {
    let edit = Value::Object(edit);
    let merged = match (asked, shown) {
        (Some(asked), Some(shown)) => merge_value(asked, shown, edit, &mut String::new())?,
        _ => {
            refuse_placeholders(&edit, &mut String::new())?;
            edit
        }
    };
    match merged {
        Value::Object(map) => Ok(map),
        // The top level is an object on every path above.
        other => Err(format!("the edit is not an object but {other}")),
    }
}

fn merge_value(
    asked: &Value,
    shown: &Value,
    edit: Value,
    path: &mut String,
) -> Result<Value, String> {
    if &edit == shown {
        // Left as shown: the real value, secrets included.
        return Ok(asked.clone());
    }
    match (asked, shown, edit) {
        (Value::Object(asked), Value::Object(shown), Value::Object(edit)) => {
            let mut merged = Map::new();
            for (key, value) in edit {
                let len = path.len();
                path.push('/');
                path.push_str(&key);
                let value = match (asked.get(&key), shown.get(&key)) {
                    (Some(asked), Some(shown)) => merge_value(asked, shown, value, path)?,
                    _ => {
                        refuse_placeholders(&value, path)?;
                        value
                    }
                };
                path.truncate(len);
                merged.insert(key, value);
            }
            Ok(Value::Object(merged))
        }
        (Value::Array(asked), Value::Array(shown), Value::Array(edit)) => {
            let mut merged = Vec::with_capacity(edit.len());
            for (index, value) in edit.into_iter().enumerate() {
                let len = path.len();
                path.push('/');
                path.push_str(&index.to_string());
                let value = match (asked.get(index), shown.get(index)) {
                    (Some(asked), Some(shown)) => merge_value(asked, shown, value, path)?,
                    _ => {
                        refuse_placeholders(&value, path)?;
                        value
                    }
                };
                path.truncate(len);
                merged.push(value);
            }
            Ok(Value::Array(merged))
        }
        (asked, shown, edit) => {
            if asked != shown {
                // The person changed a value they only saw redacted: what
                // they meant for the hidden part cannot be known.
                return Err(format!(
                    "the edit changes {}, which held a redacted value: leave it as shown or \
                     replace the whole call",
                    display_path(path)
                ));
            }
            refuse_placeholders(&edit, path)?;
            Ok(edit)
        }
    }
}

/// Refuses a value that writes a redaction placeholder anywhere in it.
fn refuse_placeholders(value: &Value, path: &mut String) -> Result<(), String> {
    match value {
        Value::String(text) if holds_placeholder(text) => Err(format!(
            "the edit writes a redaction placeholder at {}: a placeholder never reaches a tool",
            display_path(path)
        )),
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                let len = path.len();
                path.push('/');
                path.push_str(&index.to_string());
                refuse_placeholders(item, path)?;
                path.truncate(len);
            }
            Ok(())
        }
        Value::Object(map) => {
            for (key, item) in map {
                let len = path.len();
                path.push('/');
                path.push_str(key);
                refuse_placeholders(item, path)?;
                path.truncate(len);
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

fn display_path(path: &str) -> String {
    if path.is_empty() {
        "the arguments".to_owned()
    } else {
        format!("`{path}`")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn object(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }

    #[test]
    fn placeholders_are_recognized_in_their_written_forms() {
        for text in [
            "[REDACTED]",
            "token [GITHUB-TOKEN-REDACTED] here",
            "Bearer [REDACTED]",
            "[OPENAI-KEY-REDACTED]",
        ] {
            assert!(holds_placeholder(text), "{text}");
        }
        for text in ["REDACTED", "[redacted]", "[NOT REDACTED]", "plain"] {
            assert!(!holds_placeholder(text), "{text}");
        }
    }

    #[test]
    fn a_value_left_as_shown_gets_its_secret_back() {
        let asked = json!({"path": "drafts/a.md", "token": "ghp_real", "n": [1, {"k": "s3cret"}]});
        let shown = json!({"path": "drafts/a.md", "token": "[GITHUB-TOKEN-REDACTED]", "n": [1, {"k": "[REDACTED]"}]});
        let edit = object(
            json!({"path": "drafts/b.md", "token": "[GITHUB-TOKEN-REDACTED]", "n": [1, {"k": "[REDACTED]"}]}),
        );
        let merged = merge_edit(Some(&asked), Some(&shown), edit);
        assert_eq!(
            merged,
            Ok(object(
                json!({"path": "drafts/b.md", "token": "ghp_real", "n": [1, {"k": "s3cret"}]})
            ))
        );
    }

    #[test]
    fn an_edit_that_changes_a_redacted_value_is_refused() {
        let asked = json!({"header": "Bearer abc", "to": "a@example.com"});
        let shown = json!({"header": "Bearer [REDACTED]", "to": "a@example.com"});
        let edit = object(json!({"header": "Bearer [REDACTED]x", "to": "a@example.com"}));
        let refused = merge_edit(Some(&asked), Some(&shown), edit);
        assert!(refused.is_err_and(|why| why.contains("`/header`")));
    }

    #[test]
    fn a_placeholder_written_elsewhere_is_refused() {
        let asked = json!({"a": "x"});
        let edit = object(json!({"a": "x", "b": "[REDACTED]"}));
        assert!(merge_edit(Some(&asked), Some(&asked), edit.clone()).is_err());
        assert!(merge_edit(None, None, edit).is_err());
    }

    #[test]
    fn an_edit_without_redaction_is_taken_as_it_is() {
        let asked = json!({"a": "x", "b": 2});
        let edit = object(json!({"a": "y"}));
        assert_eq!(
            merge_edit(Some(&asked), Some(&asked), edit.clone()),
            Ok(edit)
        );
    }
}
