//! The audit trail's rows: appending a batch to a trail's hash chain, and
//! reading it back (see [`crate::audit`]). The chain's hash is computed
//! here, beside the writer that stores it; the trail's reader
//! ([`crate::audit::verify`]) recomputes it with the same functions.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use sqlx::Row as _;

use super::{Store, StoreError, has_table, on_pool};

/// The hash a trail's first record points back to.
pub(crate) const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// Records per `INSERT`: 7 parameters each, well under SQLite's limit of
/// 32,766 and PostgreSQL's of 65,535.
const ROWS_PER_INSERT: usize = 200;

/// One record as stored.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Row {
    pub(crate) trail: String,
    pub(crate) seq: i64,
    pub(crate) at: i64,
    pub(crate) kind: String,
    /// The stored text of the record's data.
    pub(crate) data: String,
    pub(crate) prev_hash: String,
    pub(crate) hash: String,
}

/// A record to append: when, what kind, its data.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) at: i64,
    pub(crate) kind: String,
    pub(crate) data: Value,
}

/// The canonical JSON of `value`: object keys sorted at every level, no
/// whitespace, serde_json's escaping and number forms. The hash of a
/// record is taken over it.
///
/// ```
/// use serde_json::json;
/// assert_eq!(crew_runtime::audit::canonical(&json!({"b": 1, "a": [true, {"d": null, "c": "x"}]})),
///            r#"{"a":[true,{"c":"x","d":null}],"b":1}"#);
/// ```
pub fn canonical(value: &Value) -> String {
    let mut value = value.clone();
    value.sort_all_objects();
    value.to_string()
}

/// The hash of a record: SHA-256, in lower-case hex, of the canonical JSON
/// of `{"at", "data", "kind", "prev", "seq", "trail"}` (`data` being the
/// record's canonical JSON text).
///
/// ```
/// let hash = crew_runtime::audit::record_hash("default", 1, 0, "kickoff_started", "{}", &"0".repeat(64));
/// assert_eq!(hash.len(), 64);
/// ```
pub fn record_hash(trail: &str, seq: i64, at: i64, kind: &str, data: &str, prev: &str) -> String {
    let preimage = canonical(&json!({
        "at": at,
        "data": data,
        "kind": kind,
        "prev": prev,
        "seq": seq,
        "trail": trail,
    }));
    let digest = Sha256::digest(preimage.as_bytes());
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut hex = String::with_capacity(64);
    for byte in digest {
        hex.push(char::from(HEX[usize::from(byte >> 4)]));
        hex.push(char::from(HEX[usize::from(byte & 0x0f)]));
    }
    hex
}

macro_rules! read_row {
    ($row:expr) => {{
        let row = $row;
        let corrupt = |error: sqlx::Error| StoreError::Corrupt(error.to_string());
        Ok::<Row, StoreError>(Row {
            trail: row.try_get("trail").map_err(corrupt)?,
            seq: row.try_get("seq").map_err(corrupt)?,
            at: row.try_get("at").map_err(corrupt)?,
            kind: row.try_get("kind").map_err(corrupt)?,
            data: row.try_get("data").map_err(corrupt)?,
            prev_hash: row.try_get("prev_hash").map_err(corrupt)?,
            hash: row.try_get("hash").map_err(corrupt)?,
        })
    }};
}

impl Store {
    /// Appends `entries` to `trail` in one transaction, chained after its
    /// head; returns the new head (sequence number and hash). Writers of
    /// several processes on one database take turns on the head's row, so
    /// the chain stays one.
    pub(crate) async fn append_audit(
        &self,
        trail: &str,
        entries: &[Entry],
    ) -> Result<(i64, String), StoreError> {
        self.file_still_there()?;
        let appended = self.append_audit_rows(trail, entries).await?;
        // Removed during the write: the batch went to a file without a
        // name; it stays queued rather than be taken for written.
        self.file_still_there()?;
        Ok(appended)
    }

    async fn append_audit_rows(
        &self,
        trail: &str,
        entries: &[Entry],
    ) -> Result<(i64, String), StoreError> {
        on_pool!(self, |pool| {
            let mut tx = pool.begin().await?;
            // A write first: on SQLite it takes the database's write lock,
            // on PostgreSQL the head's row lock (with the update below), so
            // no other writer reads the same head.
            sqlx::query(
                "INSERT INTO crew_audit_heads (trail, seq, hash) VALUES ($1, 0, $2) \
                 ON CONFLICT (trail) DO NOTHING",
            )
            .bind(trail)
            .bind(GENESIS)
            .execute(&mut *tx)
            .await?;
            sqlx::query("UPDATE crew_audit_heads SET seq = seq WHERE trail = $1")
                .bind(trail)
                .execute(&mut *tx)
                .await?;
            // The chain's end as the records say (the head's row is only
            // the writers' lock): a stale or missing row cannot make two
            // records share a place.
            let last = sqlx::query(
                "SELECT seq, hash FROM crew_audit WHERE trail = $1 ORDER BY seq DESC LIMIT 1",
            )
            .bind(trail)
            .fetch_optional(&mut *tx)
            .await?;
            let (mut seq, mut prev): (i64, String) = match last {
                Some(row) => (row.try_get("seq")?, row.try_get("hash")?),
                None => (0, GENESIS.to_owned()),
            };
            // Hash the chain first, then insert it many rows per statement:
            // one round trip per chunk, not per record.
            let mut rows = Vec::with_capacity(entries.len());
            for entry in entries {
                seq += 1;
                let data = canonical(&entry.data);
                let hash = record_hash(trail, seq, entry.at, &entry.kind, &data, &prev);
                rows.push((
                    seq,
                    entry,
                    data,
                    std::mem::replace(&mut prev, hash.clone()),
                    hash,
                ));
            }
            for chunk in rows.chunks(ROWS_PER_INSERT) {
                let mut sql = String::from(
                    "INSERT INTO crew_audit (trail, seq, at, kind, data, prev_hash, hash) VALUES ",
                );
                for n in 0..chunk.len() {
                    let at = n * 7;
                    if n > 0 {
                        sql.push_str(", ");
                    }
                    sql.push_str(&format!(
                        "(${}, ${}, ${}, ${}, ${}, ${}, ${})",
                        at + 1,
                        at + 2,
                        at + 3,
                        at + 4,
                        at + 5,
                        at + 6,
                        at + 7
                    ));
                }
                let mut query = sqlx::query(&sql);
                for (seq, entry, data, prev_hash, hash) in chunk {
                    query = query
                        .bind(trail)
                        .bind(*seq)
                        .bind(entry.at)
                        .bind(entry.kind.as_str())
                        .bind(data.as_str())
                        .bind(prev_hash.as_str())
                        .bind(hash.as_str());
                }
                query.execute(&mut *tx).await?;
            }
            sqlx::query("UPDATE crew_audit_heads SET seq = $2, hash = $3 WHERE trail = $1")
                .bind(trail)
                .bind(seq)
                .bind(&prev)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok((seq, prev))
        })
    }

    /// Up to `limit` records of `trail` after `after` (a sequence number),
    /// in order.
    pub(crate) async fn audit_rows(
        &self,
        trail: &str,
        after: i64,
        limit: i64,
    ) -> Result<Vec<Row>, StoreError> {
        let sql = "SELECT trail, seq, at, kind, data, prev_hash, hash FROM crew_audit \
                   WHERE trail = $1 AND seq > $2 ORDER BY seq LIMIT $3";
        on_pool!(self, |pool| {
            let rows = sqlx::query(sql)
                .bind(trail)
                .bind(after)
                .bind(limit)
                .fetch_all(pool)
                .await?;
            rows.iter().map(|row| read_row!(row)).collect()
        })
    }

    /// The last `count` records of `trail`, in order (those at sequence 0
    /// or below, which no writer makes, left out).
    pub(crate) async fn audit_tail_rows(
        &self,
        trail: &str,
        count: i64,
    ) -> Result<Vec<Row>, StoreError> {
        let sql = "SELECT trail, seq, at, kind, data, prev_hash, hash FROM crew_audit \
                   WHERE trail = $1 AND seq > 0 ORDER BY seq DESC LIMIT $2";
        let mut rows: Vec<Row> = on_pool!(self, |pool| {
            let rows = sqlx::query(sql)
                .bind(trail)
                .bind(count)
                .fetch_all(pool)
                .await?;
            rows.iter()
                .map(|row| read_row!(row))
                .collect::<Result<Vec<Row>, StoreError>>()
        })?;
        rows.reverse();
        Ok(rows)
    }

    /// The trails that have records or a head (the head's row outlives
    /// records deleted by hand).
    pub(crate) async fn audit_trail_names(&self) -> Result<Vec<String>, StoreError> {
        let sql = "SELECT trail FROM crew_audit UNION SELECT trail FROM crew_audit_heads \
                   ORDER BY trail";
        on_pool!(self, |pool| {
            Ok(sqlx::query_scalar(sql).fetch_all(pool).await?)
        })
    }

    /// The sequence numbers, lowest first, of up to `limit` records of
    /// `trail` at 0 or below: none a writer makes.
    pub(crate) async fn audit_seqs_outside_the_chain(
        &self,
        trail: &str,
        limit: i64,
    ) -> Result<Vec<i64>, StoreError> {
        let sql = "SELECT seq FROM crew_audit WHERE trail = $1 AND seq <= 0 ORDER BY seq LIMIT $2";
        on_pool!(self, |pool| {
            Ok(sqlx::query_scalar(sql)
                .bind(trail)
                .bind(limit)
                .fetch_all(pool)
                .await?)
        })
    }

    /// The sequence number the writers' head row of `trail` holds, if the
    /// trail has one.
    pub(crate) async fn audit_head_seq(&self, trail: &str) -> Result<Option<i64>, StoreError> {
        let sql = "SELECT seq FROM crew_audit_heads WHERE trail = $1";
        on_pool!(self, |pool| {
            Ok(sqlx::query_scalar(sql)
                .bind(trail)
                .fetch_optional(pool)
                .await?)
        })
    }

    /// Whether the store has the audit trail's tables (a store opened
    /// read-only may predate them, or have lost them).
    pub(crate) async fn audit_tables_present(&self) -> Result<bool, StoreError> {
        Ok(has_table(&self.inner.pool, "crew_audit").await?
            && has_table(&self.inner.pool, "crew_audit_heads").await?)
    }
}
