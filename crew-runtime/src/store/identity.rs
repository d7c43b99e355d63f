//! Who is who: the form in which two names of people are compared.
//!
//! A kickoff's requester and an approver's account name are typed by
//! different people in different places: `Carol`, `carol`, `Carol ` and a
//! `José` whose accent is a separate combining mark are one person. The
//! requester rule compares their [`identity_key`]s: the name trimmed,
//! NFKC-normalized and case-folded.

use unicode_normalization::UnicodeNormalization as _;

/// The key under which `name` is compared with other names of people:
/// trimmed, in Unicode compatibility form (NFKC: `ｃａｒｏｌ` is `carol`, an
/// accent typed apart joins its letter), and case-folded (upper-casing
/// then lower-casing, which folds `ß` to `ss` as full case folding does),
/// then normalized again (folding can undo NFKC).
pub(crate) fn identity_key(name: &str) -> String {
    let compatible: String = name.trim().nfkc().collect();
    let folded = compatible.to_uppercase().to_lowercase();
    folded.nfkc().collect::<String>().trim().to_owned()
}

/// Whether two names of people name the same identity (see
/// [`identity_key`]).
pub(crate) fn same_identity(a: &str, b: &str) -> bool {
    identity_key(a) == identity_key(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn case_spaces_and_unicode_forms_name_one_identity() {
        assert!(same_identity("Carol", "carol"));
        assert!(same_identity("Carol ", "Carol"));
        assert!(same_identity("\u{a0}carol\t", "CAROL"));
        // NFD (e + combining acute) and NFC (é).
        assert!(same_identity("Jose\u{301}", "Jos\u{e9}"));
        // Full-width letters are their ASCII selves under NFKC.
        assert!(same_identity("\u{ff23}arol", "carol"));
        assert!(same_identity("Stra\u{df}e", "STRASSE"));
        assert!(!same_identity("carol", "caroline"));
        assert!(!same_identity("alice", "bob"));
    }
}
