//! Named crash points, for the crash tests of durable kickoffs (SPEC §13,
//! "Proved by crashing it"): places where a test harness has the process
//! killed with `SIGKILL`, as a crash or an `kill -9` leaves it, to check
//! that the kickoff is resumed elsewhere with every effect once.
//!
//! Test-only. Without the feature `crash-points` (which no default or
//! documented feature enables) every [`reached`] compiles to nothing and
//! [`arm`] refuses. With it, the one point armed for the process (by the
//! environment variable `CREW_CRASH_AT`, read once, or by [`arm`]) kills
//! the process when it is reached; every other point does nothing.
//!
//! ```
//! use crew_runtime::crash_point;
//! // Does nothing unless the process armed this very point.
//! crash_point::reached("tool_running");
//! assert!(crash_point::POINTS.contains(&"tool_running"));
//! if !crash_point::built() {
//!     assert!(crash_point::arm("tool_running").is_err());
//! }
//! ```

/// The environment variable that arms a point for the process.
pub const ENVIRONMENT: &str = "CREW_CRASH_AT";

/// Every crash point, by name: those of the journal (before and after each
/// append, by the entry's kind), of a resumer, of the kickoff's end, and
/// those a tool or a program calls itself (`tool_running`, `after_effect`,
/// `question_pending`). A harness iterates them; [`arm`] takes no other.
///
/// ```
/// for point in crew_runtime::crash_point::POINTS {
///     assert!(!point.is_empty());
/// }
/// ```
pub const POINTS: &[&str] = &[
    "before_append:start",
    "after_append:start",
    "before_append:inputs",
    "after_append:inputs",
    "before_append:step",
    "after_append:step",
    "before_append:answer",
    "after_append:answer",
    "before_append:gate",
    "after_append:gate",
    "before_append:intent",
    "after_append:intent",
    "before_append:result",
    "after_append:result",
    "before_append:task",
    "after_append:task",
    "before_append:end",
    "after_append:end",
    // A resumer claimed a kickoff and has not replayed it yet.
    "after_claim",
    // The end entry is committed; the kickoff is not marked finished yet.
    "before_finish",
    // Called by a tool: inside it, before its effect.
    "tool_running",
    // Called by a tool: its effect written, its result not yet returned
    // (so not journaled).
    "after_effect",
    // Called by a program: a question of the kickoff waits for a person.
    "question_pending",
];

/// Why a crash point could not be armed.
///
/// ```
/// use crew_runtime::crash_point::{self, CrashPointError};
/// assert!(matches!(crash_point::arm("no_such_point"), Err(CrashPointError::Unknown { .. }) | Err(CrashPointError::NotBuilt)));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CrashPointError {
    /// The program was built without the feature `crash-points`: no point
    /// can kill it.
    #[error(
        "this program was built without crash points: build it with the feature `crash-points` \
         (test-only) to arm one"
    )]
    NotBuilt,
    /// No point has this name.
    #[error("there is no crash point `{name}` (the points: {})", POINTS.join(", "))]
    Unknown {
        /// The name given.
        name: String,
    },
}

/// Whether this build has the crash points (the feature `crash-points`).
///
/// ```
/// let _ = crew_runtime::crash_point::built();
/// ```
#[inline(always)]
pub const fn built() -> bool {
    cfg!(feature = "crash-points")
}

/// Arms the point `name` for this process (replacing any armed by
/// `CREW_CRASH_AT`): reaching it kills the process.
///
/// Errors: the build has no crash points ([`CrashPointError::NotBuilt`]);
/// no point has this name ([`CrashPointError::Unknown`]).
///
/// ```
/// use crew_runtime::crash_point;
/// if crash_point::built() {
///     // Armed on a point this example never reaches.
///     crash_point::arm("before_finish")?;
/// }
/// # Ok::<(), crash_point::CrashPointError>(())
/// ```
pub fn arm(name: &str) -> Result<(), CrashPointError> {
    if !built() {
        return Err(CrashPointError::NotBuilt);
    }
    if !POINTS.contains(&name) {
        return Err(CrashPointError::Unknown {
            name: name.to_owned(),
        });
    }
    #[cfg(feature = "crash-points")]
    armed::set(name);
    Ok(())
}

/// The point `name` is reached: the process is killed here if it is the
/// one armed. Compiles to nothing without the feature `crash-points`.
///
/// ```
/// crew_runtime::crash_point::reached("after_effect");
/// ```
#[inline(always)]
pub fn reached(name: &str) {
    #[cfg(feature = "crash-points")]
    {
        debug_assert!(POINTS.contains(&name), "`{name}` is not in POINTS");
        if armed::is(name, "") {
            kill(name);
        }
    }
    #[cfg(not(feature = "crash-points"))]
    let _ = name;
}

/// The point `{stage}:{kind}` is reached (`before_append:intent`), without
/// making its name unless the points are built.
#[inline(always)]
#[cfg_attr(
    not(feature = "durable"),
    allow(dead_code, reason = "called by durable kickoffs' journal only")
)]
pub(crate) fn reached_at(stage: &str, kind: &str) {
    #[cfg(feature = "crash-points")]
    if armed::is(stage, kind) {
        kill(&format!("{stage}:{kind}"));
    }
    #[cfg(not(feature = "crash-points"))]
    let _ = (stage, kind);
}

/// Kills the process with `SIGKILL`: no destructor, no flush, no exit
/// handler runs, as a crash leaves it.
#[cfg(feature = "crash-points")]
fn kill(name: &str) -> ! {
    use std::io::Write as _;
    // One line for the harness's log; standard error is unbuffered.
    let _ = writeln!(std::io::stderr(), "crash point {name}: killed");
    #[cfg(unix)]
    // SAFETY: `raise` has no preconditions; SIGKILL cannot be caught, so
    // it does not return.
    #[allow(unsafe_code)]
    unsafe {
        libc::raise(libc::SIGKILL);
    }
    std::process::abort()
}

#[cfg(feature = "crash-points")]
mod armed {
    use std::sync::{Mutex, OnceLock, PoisonError};

    /// The armed point: from `CREW_CRASH_AT` when first looked at, then
    /// whatever `arm` set.
    fn slot() -> &'static Mutex<Option<String>> {
        static ARMED: OnceLock<Mutex<Option<String>>> = OnceLock::new();
        ARMED.get_or_init(|| {
            let from_env = std::env::var(super::ENVIRONMENT)
                .ok()
                .filter(|name| !name.is_empty());
            Mutex::new(from_env)
        })
    }

    pub(super) fn set(name: &str) {
        *slot().lock().unwrap_or_else(PoisonError::into_inner) = Some(name.to_owned());
    }

    /// Whether the armed point is `stage` (`kind` empty) or `stage:kind`.
    pub(super) fn is(stage: &str, kind: &str) -> bool {
        let armed = slot().lock().unwrap_or_else(PoisonError::into_inner);
        super::names(armed.as_deref(), stage, kind)
    }
}

/// Whether `armed` is the point `stage` (`kind` empty) or `stage:kind`.
#[cfg_attr(not(feature = "crash-points"), allow(dead_code))]
fn names(armed: Option<&str>, stage: &str, kind: &str) -> bool {
    let Some(armed) = armed else {
        return false;
    };
    if kind.is_empty() {
        return armed == stage;
    }
    armed
        .strip_prefix(stage)
        .and_then(|rest| rest.strip_prefix(':'))
        .is_some_and(|rest| rest == kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_point_has_one_name() {
        let mut names: Vec<&str> = POINTS.to_vec();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), POINTS.len(), "a name is listed twice");
        assert!(POINTS.len() >= 20, "SPEC §13 asks for at least 20 points");
    }

    /// The names at the call sites of this crate, as written in its files.
    fn call_sites(source: &str) -> Vec<String> {
        let mut names = Vec::new();
        for (at, _) in source.match_indices("crash_point::reached(\"") {
            let rest = &source[at + "crash_point::reached(\"".len()..];
            if let Some(end) = rest.find('"') {
                names.push(rest[..end].to_owned());
            }
        }
        for (at, _) in source.match_indices("crash_point::reached_at(\"") {
            let rest = &source[at + "crash_point::reached_at(\"".len()..];
            if let Some(end) = rest.find('"') {
                names.push(format!("{}:", &rest[..end]));
            }
        }
        names
    }

    #[test]
    fn every_call_site_names_a_listed_point() {
        // The crate's files that reach points (the durable runtime).
        let sources = [include_str!("durable.rs")];
        let mut seen = 0;
        for source in sources {
            for name in call_sites(source) {
                seen += 1;
                if let Some(stage) = name.strip_suffix(':') {
                    // A staged point: one per kind of journal entry.
                    assert!(
                        POINTS
                            .iter()
                            .any(|point| point.starts_with(&format!("{stage}:"))),
                        "no listed point of the stage `{stage}`"
                    );
                } else {
                    assert!(POINTS.contains(&name.as_str()), "`{name}` is not in POINTS");
                }
            }
        }
        assert!(seen >= 3, "the call sites were not found ({seen})");
    }

    #[test]
    fn an_unknown_point_is_refused_and_a_known_one_only_with_the_feature() {
        match arm("no_such_point") {
            Err(CrashPointError::Unknown { name }) => assert!(built(), "{name}"),
            Err(CrashPointError::NotBuilt) => assert!(!built()),
            Ok(()) => panic!("an unknown point was armed"),
        }
        let error = CrashPointError::Unknown {
            name: "x".to_owned(),
        };
        assert!(error.to_string().contains("tool_running"), "{error}");
        assert!(
            CrashPointError::NotBuilt
                .to_string()
                .contains("crash-points")
        );
    }

    #[test]
    fn a_staged_point_matches_its_stage_and_kind_only() {
        // Pure: arming a point here would kill this test binary if another
        // test reached it meanwhile.
        let armed = Some("before_append:intent");
        assert!(names(armed, "before_append", "intent"));
        assert!(!names(armed, "before_append", "int"));
        assert!(!names(armed, "after_append", "intent"));
        assert!(!names(armed, "before_append", ""));
        assert!(names(Some("after_claim"), "after_claim", ""));
        assert!(!names(Some("after_claim"), "after_claim", "x"));
        assert!(!names(None, "after_claim", ""));
    }
}
