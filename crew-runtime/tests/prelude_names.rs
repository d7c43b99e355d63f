//! The prelude is small and says what it holds: its module docs list every
//! name it re-exports, one line each, and nothing else; the CrewAI-named
//! functions and the console are reached by path, not through it.

use std::collections::BTreeSet;

const LIB: &str = include_str!("../src/lib.rs");

/// The names the `prelude` module re-exports, read from its `pub use` lines.
fn exported() -> BTreeSet<String> {
    let start = LIB
        .find("pub mod prelude {")
        .expect("lib.rs declares the prelude");
    let body = &LIB[start..];
    let end = body.find("\n}").expect("the prelude module is closed");
    let mut names = BTreeSet::new();
    for item in body[..end].split("pub use ").skip(1) {
        let item = &item[..item.find(';').expect("a `pub use` ends with `;`")];
        let list = match (item.find('{'), item.rfind('}')) {
            (Some(open), Some(close)) => &item[open + 1..close],
            _ => item.rsplit("::").next().unwrap_or(item),
        };
        for path in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            names.insert(path.rsplit("::").next().unwrap_or(path).to_owned());
        }
    }
    names
}

/// The names the prelude's docs list: the first column of its table.
fn documented() -> Vec<String> {
    let start = LIB
        .find("pub mod prelude {")
        .expect("lib.rs declares the prelude");
    let docs_start = LIB[..start]
        .rfind("\n\n")
        .expect("the prelude's docs follow a blank line");
    LIB[docs_start..start]
        .lines()
        .filter_map(|line| line.trim().strip_prefix("/// | [`"))
        .map(|row| {
            let name = &row[..row.find('`').expect("a name in backticks")];
            name.trim_end_matches('!').to_owned()
        })
        .collect()
}

#[test]
fn prelude_docs_list_every_name_once() {
    let documented = documented();
    let unique: BTreeSet<String> = documented.iter().cloned().collect();
    assert_eq!(
        documented.len(),
        unique.len(),
        "a name listed twice: {documented:?}"
    );
    assert_eq!(
        unique,
        exported(),
        "the prelude's table and its `pub use` lines differ"
    );
}

#[test]
fn prelude_holds_twenty_to_thirty_names() {
    let count = exported().len();
    assert!(
        (20..=30).contains(&count),
        "the prelude holds {count} names"
    );
}

#[test]
fn prelude_leaves_legacy_functions_and_console_out() {
    let exported = exported();
    let legacy: Vec<_> = exported
        .iter()
        .filter(|name| {
            ["register_", "unregister_", "get_", "clear_"]
                .iter()
                .any(|prefix| name.starts_with(prefix))
        })
        .collect();
    assert!(
        legacy.is_empty(),
        "management functions in the prelude: {legacy:?}"
    );
    assert!(!exported.contains("TerminalInput"));
    assert!(!exported.contains("console"));
}
