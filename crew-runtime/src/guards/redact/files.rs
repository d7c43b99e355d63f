//! Credential files known by their layout rather than by a key: `.pgpass`
//! lines, password hashes in `/etc/shadow` and `.htpasswd` files, the
//! `requirepass` of a Redis configuration, and CSV files with a column
//! named like a secret (the AWS console's `credentials.csv`).

use std::ops::Range;
use std::sync::LazyLock;

use regex::{Captures, Regex};

use super::key_value::{is_password_key, is_secret_name, secret_part};
use super::{CheckedRule, Decide, Decision, REDACTED, replace_ranges};

/// A `.pgpass` line, `hostname:port:database:username:password`, any field
/// but the password possibly `*`, `:` and `\` escaped with `\`.
const PGPASS: &str = concat!(
    r"(?m)^(?P<host>(?:[^:\s\\#]|\\.)+):(?:[0-9]{1,5}|\*):",
    r"(?P<database>(?:[^:\s\\]|\\.)+):(?P<user>(?:[^:\s\\]|\\.)+):",
    r"(?P<password>(?:[^:\s\\]|\\.)+)[ \t]*\r?$",
);

fn pgpass(text: &str, captures: &Captures<'_>) -> Decision {
    let field = |name: &str| captures.name(name).map_or("", |field| field.as_str());
    let Some(password) = captures.name("password") else {
        return keep_from(captures);
    };
    // A host is a name, an address or `*`, a database and a user are
    // names; five short hex groups are an IPv6 address or a MAC-like id,
    // five numbers a time, and `host:port:0:info:3` a status line.
    let host = field("host");
    let number = |text: &str| text.bytes().all(|b| b.is_ascii_digit());
    let named = (host == "*" || host.bytes().any(|b| b == b'.' || b.is_ascii_alphabetic()))
        && !number(field("database"))
        && !number(field("user"))
        && !(number(password.as_str()) && password.len() < 4);
    let hex_groups = captures
        .get_match()
        .as_str()
        .trim_end()
        .split(':')
        .all(|group| group.len() <= 4 && group.bytes().all(|b| b.is_ascii_hexdigit()));
    if !named || hex_groups {
        return keep_from(captures);
    }
    match secret_part(text, password.range(), "password") {
        Some(range) => replace(range),
        None => keep_from(captures),
    }
}

/// A password hash after `user:` at the start of a line: crypt(3) formats
/// (`$6$…`, `$y$…`, `$2y$…`, `$apr1$…`) as `/etc/shadow` and `htpasswd`
/// write them, and `{SHA}`/`{SSHA}` hashes; a `!` in front (a locked
/// account) stays.
const PASSWORD_HASH: &str = concat!(
    r"(?m)^[^:\s#]+:!?(?P<hash>",
    r"\$(?:1|2[abxy]?|5|6|7|y|gy|apr1|md5|sha1)\$[^:\s]+",
    r"|\{S?SHA\}[A-Za-z0-9+/]+=*",
    r")(?::|[ \t]*\r?$)",
);

fn password_hash(_: &str, captures: &Captures<'_>) -> Decision {
    match captures.name("hash") {
        Some(hash) => replace(hash.range()),
        None => keep_from(captures),
    }
}

/// Redis: `requirepass …`, `masterauth …` in `redis.conf`, also as
/// `CONFIG SET requirepass …`.
const REDIS_PASSWORD: &str = r#"(?im)^[ \t]*(?:config[ \t]+set[ \t]+)?(?:requirepass|masterauth)[ \t]+(?:"(?P<dq>[^"\r\n]*)"|'(?P<sq>[^'\r\n]*)'|(?P<bare>[^\s"']\S*))"#;

fn redis_password(text: &str, captures: &Captures<'_>) -> Decision {
    match ["dq", "sq", "bare"]
        .iter()
        .find_map(|name| captures.name(name))
        .and_then(|value| secret_part(text, value.range(), "password"))
    {
        Some(range) => replace(range),
        None => keep_from(captures),
    }
}

fn replace(range: Range<usize>) -> Decision {
    Decision::Replace {
        range,
        label: REDACTED,
        quote: None,
    }
}

fn keep_from(captures: &Captures<'_>) -> Decision {
    Decision::Keep {
        resume: captures.get_match().end(),
    }
}

/// The rules of this module that look at one match each, in the order they
/// run (CSV columns are [`csv_columns`]).
pub(super) static RULES: LazyLock<Vec<CheckedRule>> = LazyLock::new(|| {
    [
        (PGPASS, pgpass as Decide),
        (PASSWORD_HASH, password_hash),
        (REDIS_PASSWORD, redis_password),
    ]
    .into_iter()
    .filter_map(|(pattern, decide)| CheckedRule::new(pattern, decide))
    .collect()
});

/// How many checked rules this module defines (for the tests).
#[cfg(test)]
pub(super) const CHECKED_COUNT: usize = 3;

/// A CSV header: two or more column names (letters, digits, spaces,
/// `_ . -`), comma-, tab- or semicolon-separated, maybe quoted.
const CSV_HEADER: &str = concat!(
    r#"(?m)^[ \t]*"?[A-Za-z][A-Za-z0-9 _.-]{0,40}"?"#,
    r#"(?:[,\t;][ \t]*"?[A-Za-z][A-Za-z0-9 _.-]{0,40}"?)+[ \t]*\r?$"#,
);

static CSV_HEADERS: LazyLock<Option<Regex>> = LazyLock::new(|| super::compile(CSV_HEADER));

/// The most data rows read under one header.
const MAX_ROWS: usize = 10_000;

/// The fields of a column named like a secret (`Password`, `Secret access
/// key`, `api_token`), in every row under the header, up to a blank line
/// or a row with another number of fields. Written into `out`; whether
/// anything changed.
pub(super) fn csv_columns(text: &str, out: &mut String) -> bool {
    let Some(headers) = CSV_HEADERS.as_ref() else {
        return false;
    };
    let mut found = Vec::new();
    let mut search = 0;
    while let Some(header) = headers.find_at(text, search) {
        search = header.end();
        let line = header.as_str();
        let separator = [',', '\t', ';']
            .into_iter()
            .find(|&s| line.contains(s))
            .unwrap_or(',');
        let names: Vec<String> = fields(line, separator)
            .into_iter()
            .map(|range| line[range].trim().replace(' ', "_"))
            .collect();
        let secret_columns: Vec<usize> = names
            .iter()
            .enumerate()
            .filter_map(|(index, name)| is_secret_name(name).then_some(index))
            .collect();
        if secret_columns.is_empty() {
            continue;
        }
        let mut at = header.end();
        for _ in 0..MAX_ROWS {
            let Some(rest) = text[at..]
                .strip_prefix("\r\n")
                .or_else(|| text[at..].strip_prefix('\n'))
            else {
                break;
            };
            let row_start = text.len() - rest.len();
            let row_end = rest.find('\n').map_or(text.len(), |end| row_start + end);
            let row = text[row_start..row_end].trim_end_matches('\r');
            let cells = fields(row, separator);
            if row.trim().is_empty() || cells.len() != names.len() {
                break;
            }
            for &column in &secret_columns {
                let cell = &cells[column];
                let range = row_start + cell.start..row_start + cell.end;
                let value = text[range.clone()].trim();
                // `x` or `-` in a column of hashes stands for none; a
                // number is a secret only where a password is asked for.
                let number = value.bytes().all(|b| b.is_ascii_digit());
                if value.chars().count() < 4 || (number && !is_password_key(&names[column])) {
                    continue;
                }
                if let Some(range) = secret_part(text, range, &names[column]) {
                    found.push(range);
                }
            }
            at = row_end;
        }
        // The rows read are not headers of their own.
        search = search.max(at);
    }
    replace_ranges(text, found, REDACTED, out)
}

/// The ranges of a CSV line's fields, inside their quotes if quoted.
fn fields(line: &str, separator: char) -> Vec<Range<usize>> {
    let mut fields = Vec::new();
    let mut start = 0;
    let mut quoted = false;
    let mut field_start = 0;
    for (at, ch) in line.char_indices() {
        if ch == '"' && line[start..at].trim().is_empty() && !quoted {
            quoted = true;
            field_start = at + 1;
        } else if ch == '"' && quoted {
            quoted = false;
            fields.push(field_start..at);
            field_start = usize::MAX;
        } else if ch == separator && !quoted {
            if field_start != usize::MAX {
                fields.push(start..at);
            }
            start = at + ch.len_utf8();
            field_start = start;
        }
    }
    if field_start != usize::MAX {
        fields.push(start..line.len());
    }
    fields
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_fields_inside_quotes() {
        let line = r#""a b",c,"d,e""#;
        let found: Vec<&str> = fields(line, ',').into_iter().map(|r| &line[r]).collect();
        assert_eq!(found, ["a b", "c", "d,e"]);
        let line = "x\t\ty";
        let found: Vec<&str> = fields(line, '\t').into_iter().map(|r| &line[r]).collect();
        assert_eq!(found, ["x", "", "y"]);
    }
}
