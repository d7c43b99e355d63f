//! The pending list, a page at a time: in scope, oldest first, after a
//! cursor. Questions are chosen from their summaries (no arguments) and
//! only the page's are read whole, so that a page costs the same however
//! many questions wait and however large their arguments.

use std::fmt;

use crate::store::{Approver, Question, Store, StoreError};

/// How many questions a page of `/` shows.
pub(crate) const PAGE_SIZE: usize = 50;

/// How many questions `GET /api/approvals` returns unless `limit` says.
pub(crate) const API_DEFAULT_LIMIT: usize = 50;

/// The most `limit` may ask for.
pub(crate) const API_MAX_LIMIT: usize = 200;

/// Where a page starts: after the question created at `created` (ms)
/// with id `id`. Its text is `<created>.<id>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cursor {
    created: i64,
    id: String,
}

impl Cursor {
    /// The cursor in a query (`after=` or `cursor=`); `None` when it is
    /// not one.
    pub(crate) fn parse(text: &str) -> Option<Cursor> {
        let (created, id) = text.split_once('.')?;
        let created = created.parse::<i64>().ok()?;
        let plain = |c: char| c.is_ascii_alphanumeric() || c == '-';
        (!id.is_empty() && id.len() <= 64 && id.chars().all(plain)).then(|| Cursor {
            created,
            id: id.to_owned(),
        })
    }
}

impl fmt::Display for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.created, self.id)
    }
}

/// One page of the pending list.
#[derive(Debug)]
pub(crate) struct Page {
    /// The page's questions, oldest first.
    pub(crate) questions: Vec<Question>,
    /// Where the next page starts, when there is one.
    pub(crate) next: Option<Cursor>,
    /// How many questions the whole list has.
    pub(crate) total: usize,
}

/// Up to `limit` pending questions `approver` may answer, after `after`
/// (from the start without it); their own requests too when
/// `with_own_requests` (the page shows them without buttons; the API
/// leaves them out).
pub(crate) async fn pending_page(
    store: &Store,
    approver: &Approver,
    after: Option<&Cursor>,
    limit: usize,
    with_own_requests: bool,
) -> Result<Page, StoreError> {
    let listed: Vec<_> = store
        .pending_summaries()
        .await?
        .into_iter()
        .filter(|question| approver.may_answer_call(&question.tool, question.capabilities))
        .filter(|question| {
            with_own_requests
                || !question
                    .requester
                    .as_deref()
                    .is_some_and(|requester| crate::store::same_identity(requester, &approver.name))
        })
        .collect();
    let total = listed.len();
    let mut chosen = listed
        .into_iter()
        .filter(|question| match after {
            None => true,
            Some(after) => (question.created_at, question.id.as_str()) > (after.created, &after.id),
        })
        .take(limit.saturating_add(1));
    let shown: Vec<_> = chosen.by_ref().take(limit).collect();
    let next = chosen.next().and(shown.last()).map(|last| Cursor {
        created: last.created_at,
        id: last.id.clone(),
    });
    let ids: Vec<String> = shown.into_iter().map(|question| question.id).collect();
    // Answered or closed since the summaries were read: left out.
    let page = store.pending_among(&ids).await?;
    Ok(Page {
        questions: page,
        next,
        total,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_read_back_and_nothing_else_reads_as_one() {
        let cursor = Cursor {
            created: 1_733_462_400_000,
            id: "3f2a0c1e-9b7d-4c55-8e21-7a0f6d1c2b3a".to_owned(),
        };
        assert_eq!(Cursor::parse(&cursor.to_string()), Some(cursor));
        for bad in ["", "12", "x.abc", "12.", "12.a b", "12.<script>"] {
            assert_eq!(Cursor::parse(bad), None, "{bad}");
        }
    }
}
