//! Approver accounts of the inbox, their secrets and sessions.
//!
//! Nothing secret is stored as given: a password as its argon2id hash (a
//! PHC string), a token or session as the SHA-256 of its text. A leaked
//! database therefore signs nobody in.

use std::sync::OnceLock;
use std::time::Duration;

use argon2::Argon2;
use argon2::password_hash::{PasswordHasher, PasswordVerifier};
use base64::Engine as _;
use hooks_core::{Capabilities, Capability, normalize_tool_name};

use super::{Question, Store, StoreError, now_millis, on_pool};

/// The longest approver name accepted, in bytes.
const MAX_NAME_BYTES: usize = 128;

/// The shortest password accepted, in characters.
const MIN_PASSWORD_CHARS: usize = 8;

/// The longest password accepted, in bytes: longer ones are refused rather
/// than hashed, so that nobody can make the server hash megabytes.
const MAX_PASSWORD_BYTES: usize = 1024;

/// Which questions an approver may answer. Unlimited by default; each
/// limit that is set must be met.
///
/// ```
/// use crew_runtime::Capability;
/// use crew_runtime::store::ApproverScope;
///
/// let payments = ApproverScope::everything().tools(["send_payment", "refund"]);
/// let cleaners = ApproverScope::everything().capabilities([Capability::Destructive]);
/// assert_eq!(payments.tools, Some(vec!["send_payment".to_owned(), "refund".to_owned()]));
/// assert!(cleaners.tools.is_none());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ApproverScope {
    /// Only calls of these tools (names are normalized); `None`: any tool.
    pub tools: Option<Vec<String>>,
    /// Only calls of tools that declare at least one of these
    /// capabilities; `None`: any tool.
    pub capabilities: Option<Vec<Capability>>,
}

impl ApproverScope {
    /// No limit: every question.
    ///
    /// ```
    /// let scope = crew_runtime::store::ApproverScope::everything();
    /// assert!(scope.tools.is_none() && scope.capabilities.is_none());
    /// ```
    pub fn everything() -> Self {
        ApproverScope::default()
    }

    /// Limits the approver to calls of these tools.
    ///
    /// ```
    /// let scope = crew_runtime::store::ApproverScope::everything().tools(["Send Email"]);
    /// assert_eq!(scope.tools, Some(vec!["send_email".to_owned()]));
    /// ```
    pub fn tools<I, S>(mut self, tools: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.tools = Some(
            tools
                .into_iter()
                .map(|tool| normalize_tool_name(tool.as_ref()))
                .collect(),
        );
        self
    }

    /// Limits the approver to calls of tools declaring any of these
    /// capabilities (a tool that declares nothing counts as destructive
    /// and open-world).
    ///
    /// ```
    /// use crew_runtime::Capability;
    /// let scope = crew_runtime::store::ApproverScope::everything().capabilities([Capability::OpenWorld]);
    /// assert_eq!(scope.capabilities, Some(vec![Capability::OpenWorld]));
    /// ```
    pub fn capabilities(mut self, capabilities: impl IntoIterator<Item = Capability>) -> Self {
        self.capabilities = Some(capabilities.into_iter().collect());
        self
    }
}

/// An approver account: who may answer questions, and which.
///
/// ```
/// use crew_runtime::store::{Approver, ApproverScope};
///
/// let alice = Approver::new("alice", ApproverScope::everything().tools(["send_payment"]));
/// assert_eq!(alice.name, "alice");
/// assert_eq!(alice.tools.as_deref(), Some(&["send_payment".to_owned()][..]));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Approver {
    /// The account name: an answer is recorded under it, and a question
    /// whose requester has this name cannot be answered by it.
    pub name: String,
    /// Only calls of these tools (normalized names); `None`: any.
    pub tools: Option<Vec<String>>,
    /// Only calls of tools declaring one of these; `None`: any.
    pub capabilities: Option<Vec<Capability>>,
}

impl Approver {
    /// An approver named `name` limited to `scope` (not stored: see
    /// [`Store::add_approver`]).
    ///
    /// ```
    /// use crew_runtime::store::{Approver, ApproverScope};
    /// assert!(Approver::new("bob", ApproverScope::everything()).tools.is_none());
    /// ```
    pub fn new(name: impl Into<String>, scope: ApproverScope) -> Self {
        Approver {
            name: name.into(),
            tools: scope.tools,
            capabilities: scope.capabilities,
        }
    }

    /// The limits of this approver.
    ///
    /// ```
    /// use crew_runtime::store::{Approver, ApproverScope};
    /// let scope = ApproverScope::everything().tools(["refund"]);
    /// assert_eq!(Approver::new("bob", scope.clone()).scope(), scope);
    /// ```
    pub fn scope(&self) -> ApproverScope {
        ApproverScope {
            tools: self.tools.clone(),
            capabilities: self.capabilities.clone(),
        }
    }

    /// Whether the question is within this approver's scope: its tool is
    /// one of theirs (when limited to tools) and declares one of their
    /// capabilities (when limited to capabilities). Whether they are its
    /// requester is a different matter, which [`Store::decide`] checks.
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store) -> Result<(), crew_runtime::store::StoreError> {
    /// let Some(alice) = store.approver("alice").await? else { return Ok(()) };
    /// let mine: Vec<_> = store.pending().await?.into_iter().filter(|q| alice.may_answer(q)).collect();
    /// println!("alice may answer {} questions", mine.len());
    /// # Ok(())
    /// # }
    /// ```
    pub fn may_answer(&self, question: &Question) -> bool {
        self.may_answer_call(&question.tool, question.capabilities)
    }

    /// [`Approver::may_answer`] of a question about `tool`, which declares
    /// `declared`.
    pub(crate) fn may_answer_call(&self, tool: &str, declared: Capabilities) -> bool {
        if let Some(tools) = &self.tools {
            let tool = normalize_tool_name(tool);
            if !tools
                .iter()
                .any(|allowed| normalize_tool_name(allowed) == tool)
            {
                return false;
            }
        }
        if let Some(capabilities) = &self.capabilities
            && !capabilities
                .iter()
                .any(|&capability| declared.contains(capability))
        {
            return false;
        }
        true
    }

    /// The scope in words, for messages: "any tool", "the tools
    /// send_payment, refund", ….
    ///
    /// ```
    /// use crew_runtime::Capability;
    /// use crew_runtime::store::{Approver, ApproverScope};
    /// let bob = Approver::new("bob", ApproverScope::everything().capabilities([Capability::Destructive]));
    /// assert_eq!(bob.scope_description(), "tools declared destructive");
    /// ```
    pub fn scope_description(&self) -> String {
        let mut parts = Vec::new();
        if let Some(tools) = &self.tools {
            parts.push(if tools.is_empty() {
                "no tool".to_owned()
            } else {
                format!("the tools {}", tools.join(", "))
            });
        }
        if let Some(capabilities) = &self.capabilities {
            let names: Vec<&str> = capabilities.iter().map(|c| c.name()).collect();
            parts.push(if names.is_empty() {
                "no capability".to_owned()
            } else {
                format!("tools declared {}", names.join(" or "))
            });
        }
        if parts.is_empty() {
            "any tool".to_owned()
        } else {
            parts.join(", and only ")
        }
    }
}

/// The text of a new secret: 256 random bits from the operating system,
/// base64url without padding (43 characters).
fn new_secret() -> Result<String, StoreError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|error| {
        StoreError::Account(format!(
            "the operating system gave no random bytes: {error}"
        ))
    })?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}

/// What is stored of a secret: the hex SHA-256 of its text.
pub(crate) fn secret_hash(secret: &str) -> String {
    super::hex_sha256(secret.as_bytes())
}

/// Whether two secrets are equal, in time that depends only on their
/// lengths (which are not secret): a byte-by-byte early exit would tell
/// an attacker how much of a guess was right.
pub(crate) fn same_secret(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let difference = a
        .iter()
        .zip(b)
        .fold(0u8, |acc, (x, y)| acc | std::hint::black_box(x ^ y));
    std::hint::black_box(difference) == 0
}

/// Checks an account name: non-empty, no control characters, no spaces
/// around it (the name is compared with a kickoff's requester as is).
fn check_name(name: &str) -> Result<(), StoreError> {
    let problem = if name.is_empty() {
        "it is empty"
    } else if name.len() > MAX_NAME_BYTES {
        "it is longer than 128 bytes"
    } else if name.chars().any(char::is_control) {
        "it contains a control character"
    } else if name.trim() != name {
        "it starts or ends with a space"
    } else {
        return Ok(());
    };
    Err(StoreError::Account(format!(
        "the approver name {name:?} cannot be used: {problem}"
    )))
}

/// The form under which two account names that a person could mistake
/// for each other are equal: the UTS #39 confusable skeleton of the
/// name's identity key.
fn look_alike_skeleton(name: &str) -> String {
    unicode_security::skeleton(&super::identity::identity_key(name)).collect()
}

/// Checks a new password's length.
fn check_password_text(password: &str) -> Result<(), StoreError> {
    if password.chars().count() < MIN_PASSWORD_CHARS {
        return Err(StoreError::Account(format!(
            "the password is too short: use at least {MIN_PASSWORD_CHARS} characters"
        )));
    }
    if password.len() > MAX_PASSWORD_BYTES {
        return Err(StoreError::Account(format!(
            "the password is too long: use at most {MAX_PASSWORD_BYTES} bytes"
        )));
    }
    Ok(())
}

/// A piece of argon2 work for the [`argon2_threads`].
type Argon2Job = Box<dyn FnOnce() + Send>;

/// Where argon2 hashes and verifications run: as many threads of their
/// own as the machine has cores, fed from one queue. Each run takes about
/// 19 MiB; on the runtime's blocking pool every run could land on another
/// of hundreds of threads, whose allocator arenas each kept that memory
/// afterwards (several hundred MiB after a burst of sign-ins). A few fixed
/// threads keep at most a few such blocks. `None` when no thread could be
/// started.
fn argon2_threads() -> Option<&'static std::sync::mpsc::Sender<Argon2Job>> {
    static QUEUE: OnceLock<Option<std::sync::mpsc::Sender<Argon2Job>>> = OnceLock::new();
    QUEUE
        .get_or_init(|| {
            let (sender, receiver) = std::sync::mpsc::channel::<Argon2Job>();
            let receiver = std::sync::Arc::new(std::sync::Mutex::new(receiver));
            let threads = std::thread::available_parallelism().map_or(1, usize::from);
            let mut started = 0;
            for n in 0..threads {
                let receiver = receiver.clone();
                let spawned = std::thread::Builder::new()
                    .name(format!("crew-argon2-{n}"))
                    .spawn(move || {
                        loop {
                            let job = match receiver.lock() {
                                Ok(queue) => queue.recv(),
                                Err(poisoned) => poisoned.into_inner().recv(),
                            };
                            match job {
                                Ok(job) => job(),
                                Err(_) => return,
                            }
                        }
                    });
                started += usize::from(spawned.is_ok());
            }
            (started > 0).then_some(sender)
        })
        .as_ref()
}

/// Runs `work` on the [`argon2_threads`] (on the blocking pool when there
/// are none) and awaits its result.
async fn on_argon2_thread<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, StoreError> {
    let stopped = |error: &dyn std::fmt::Display| {
        StoreError::Account(format!("the password work stopped: {error}"))
    };
    let Some(queue) = argon2_threads() else {
        return tokio::task::spawn_blocking(work)
            .await
            .map_err(|error| stopped(&error));
    };
    let (done, result) = tokio::sync::oneshot::channel();
    let job: Argon2Job = Box::new(move || {
        let _ = done.send(work());
    });
    queue
        .send(job)
        .map_err(|_| stopped(&"no password thread is running"))?;
    result.await.map_err(|error| stopped(&error))
}

/// The argon2id PHC string of `password`, computed off the async threads
/// (it takes tens of milliseconds by design).
async fn hash_password(password: &str) -> Result<String, StoreError> {
    let mut salt = [0u8; 16];
    getrandom::fill(&mut salt).map_err(|error| {
        StoreError::Account(format!(
            "the operating system gave no random bytes: {error}"
        ))
    })?;
    let password = password.to_owned();
    on_argon2_thread(move || {
        Argon2::default()
            .hash_password_with_salt(password.as_bytes(), &salt)
            .map(|hash| hash.to_string())
            .map_err(|error| StoreError::Account(format!("cannot hash the password: {error}")))
    })
    .await?
}

/// A hash that no password matches in practice, verified when a name is
/// unknown or has no password, so that the answer takes as long as for a
/// real account (nobody learns which names exist by timing sign-ins).
fn dummy_hash() -> &'static str {
    static DUMMY: OnceLock<String> = OnceLock::new();
    DUMMY.get_or_init(|| {
        let mut bytes = [0u8; 32];
        // Without randomness the dummy password is zeros: still no
        // account's, since real passwords need a real hash to match.
        let _ = getrandom::fill(&mut bytes);
        Argon2::default()
            .hash_password_with_salt(&bytes, b"crew-inbox-dummy")
            .map(|hash| hash.to_string())
            .unwrap_or_default()
    })
}

/// Verifies `password` against `hash` (a PHC string) off the async threads.
async fn verify_password(password: &str, hash: Option<String>) -> Result<bool, StoreError> {
    let password = password.to_owned();
    on_argon2_thread(move || {
        let real = hash.is_some();
        let hash = hash.unwrap_or_else(|| dummy_hash().to_owned());
        let matches = Argon2::default()
            .verify_password(password.as_bytes(), hash.as_str())
            .is_ok();
        real && matches
    })
    .await
}

/// An approver from its stored columns.
fn approver_of(
    name: String,
    tools: Option<String>,
    capabilities: Option<String>,
) -> Result<Approver, StoreError> {
    let corrupt =
        |error: serde_json::Error| StoreError::Corrupt(format!("approver {name:?}: {error}"));
    let tools: Option<Vec<String>> = tools
        .map(|text| serde_json::from_str(&text))
        .transpose()
        .map_err(corrupt)?;
    let capabilities: Option<Vec<String>> = capabilities
        .map(|text| serde_json::from_str(&text))
        .transpose()
        .map_err(corrupt)?;
    let capabilities = capabilities
        .map(|names| {
            names
                .iter()
                .map(|name| {
                    Capability::from_name(name).ok_or_else(|| {
                        StoreError::Corrupt(format!("unknown capability {name:?} of an approver"))
                    })
                })
                .collect::<Result<Vec<_>, _>>()
        })
        .transpose()?;
    Ok(Approver {
        name,
        tools,
        capabilities,
    })
}

/// Milliseconds in `duration`, saturated.
fn millis_in(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// An approver's name, tools and capabilities, as stored.
type ApproverRow = (String, Option<String>, Option<String>);

/// An approver's row with one more column (a password hash, a CSRF token).
type ApproverRowWith<T> = (String, Option<String>, Option<String>, T);

impl Store {
    /// Creates an approver account: `name` (non-empty, no control
    /// characters, no surrounding spaces), an optional password (at least
    /// 8 characters; stored as an argon2id hash; without one the approver
    /// signs in with one-time tokens only) and the questions they may
    /// answer.
    ///
    /// Errors: a bad name or password, a name taken already
    /// ([`StoreError::Account`] says which), the store failing.
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store) -> Result<(), crew_runtime::store::StoreError> {
    /// use crew_runtime::store::ApproverScope;
    /// let alice = store
    ///     .add_approver("alice", Some("correct horse battery"), ApproverScope::everything().tools(["send_payment"]))
    ///     .await?;
    /// assert_eq!(alice.name, "alice");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn add_approver(
        &self,
        name: &str,
        password: Option<&str>,
        scope: ApproverScope,
    ) -> Result<Approver, StoreError> {
        check_name(name)?;
        let hash = match password {
            Some(password) => {
                check_password_text(password)?;
                Some(hash_password(password).await?)
            }
            None => None,
        };
        self.refuse_look_alike(name).await?;
        let approver = Approver::new(name, scope);
        // JSON arrays of plain strings: printing them cannot fail.
        let tools = approver
            .tools
            .as_ref()
            .map(|tools| serde_json::Value::from(tools.clone()).to_string());
        let capabilities = approver.capabilities.as_ref().map(|capabilities| {
            let names: Vec<&str> = capabilities.iter().map(|c| c.name()).collect();
            serde_json::Value::from(names).to_string()
        });
        let sql = "INSERT INTO crew_approvers (name, password_hash, tools, capabilities, created_at) \
                   VALUES ($1, $2, $3, $4, $5)";
        let inserted = on_pool!(self, |pool| {
            sqlx::query(sql)
                .bind(name)
                .bind(hash.as_deref())
                .bind(tools.as_deref())
                .bind(capabilities.as_deref())
                .bind(now_millis())
                .execute(pool)
                .await
                .map(|_| ())
        });
        match inserted {
            Ok(()) => Ok(approver),
            Err(sqlx::Error::Database(error)) if error.is_unique_violation() => Err(
                StoreError::Account(format!("an approver named {name:?} exists already")),
            ),
            Err(error) => Err(error.into()),
        }
    }

    /// Refuses a new account name whose confusable skeleton (UTS #39, of
    /// its identity key: NFKC, case-folded, trimmed) is another account's,
    /// disabled ones included: `carol` beside `Carol`, or a Cyrillic `с`
    /// standing for a Latin `c`, would let one person pass for another in
    /// the requester rule and in the history.
    async fn refuse_look_alike(&self, name: &str) -> Result<(), StoreError> {
        let wanted = look_alike_skeleton(name);
        let names: Vec<String> = on_pool!(self, |pool| {
            sqlx::query_scalar("SELECT name FROM crew_approvers")
                .fetch_all(pool)
                .await?
        });
        match names
            .iter()
            .find(|other| look_alike_skeleton(other) == wanted)
        {
            Some(other) if other == name => Err(StoreError::Account(format!(
                "an approver named {name:?} exists already"
            ))),
            Some(other) => Err(StoreError::Account(format!(
                "the approver name {name:?} cannot be used: it can be mistaken for the existing approver {other:?} (same letters once case, Unicode forms and look-alike characters are set aside); choose a name that reads differently"
            ))),
            None => Ok(()),
        }
    }

    /// Sets (or, with `None`, removes) an approver's password.
    ///
    /// Errors: no such approver, a password too short or too long, the
    /// store failing.
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store) -> Result<(), crew_runtime::store::StoreError> {
    /// store.set_password("alice", Some("a much better passphrase")).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn set_password(&self, name: &str, password: Option<&str>) -> Result<(), StoreError> {
        let hash = match password {
            Some(password) => {
                check_password_text(password)?;
                Some(hash_password(password).await?)
            }
            None => None,
        };
        let sql = "UPDATE crew_approvers SET password_hash = $2 WHERE name = $1";
        let updated = on_pool!(self, |pool| {
            sqlx::query(sql)
                .bind(name)
                .bind(hash.as_deref())
                .execute(pool)
                .await?
                .rows_affected()
        });
        if updated == 0 {
            return Err(unknown_approver(name));
        }
        // Whoever knew the old password may be signed in, or have made a
        // bot's token: a new password ends both.
        self.end_access(name).await?;
        Ok(())
    }

    /// Disables an approver: they can no longer sign in, and their
    /// sessions and bearer tokens end at once (every replica reads the
    /// store on each request). Their unused sign-in tokens are revoked
    /// too. [`Store::enable_approver`] lets them sign in again, with new
    /// sessions and tokens.
    ///
    /// Errors: no such approver, the store failing.
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store) -> Result<(), crew_runtime::store::StoreError> {
    /// store.disable_approver("alice").await?;
    /// assert!(store.approver("alice").await?.is_none());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn disable_approver(&self, name: &str) -> Result<(), StoreError> {
        let sql =
            "UPDATE crew_approvers SET disabled_at = COALESCE(disabled_at, $2) WHERE name = $1";
        let updated = on_pool!(self, |pool| {
            sqlx::query(sql)
                .bind(name)
                .bind(now_millis())
                .execute(pool)
                .await?
                .rows_affected()
        });
        if updated == 0 {
            return Err(unknown_approver(name));
        }
        self.end_access(name).await?;
        let sql = "UPDATE crew_approver_tokens SET used_at = $2 \
                   WHERE approver = $1 AND kind = 'sign-in' AND used_at IS NULL";
        on_pool!(self, |pool| {
            sqlx::query(sql)
                .bind(name)
                .bind(now_millis())
                .execute(pool)
                .await?;
        });
        Ok(())
    }

    /// Lets a disabled approver sign in again (nothing of their old
    /// sessions or tokens comes back).
    ///
    /// Errors: no such approver, the store failing.
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store) -> Result<(), crew_runtime::store::StoreError> {
    /// store.enable_approver("alice").await?;
    /// assert!(store.approver("alice").await?.is_some());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn enable_approver(&self, name: &str) -> Result<(), StoreError> {
        let sql = "UPDATE crew_approvers SET disabled_at = NULL WHERE name = $1";
        let updated = on_pool!(self, |pool| {
            sqlx::query(sql)
                .bind(name)
                .execute(pool)
                .await?
                .rows_affected()
        });
        if updated == 0 {
            return Err(unknown_approver(name));
        }
        Ok(())
    }

    /// Ends every session and revokes every bearer token of `name`.
    async fn end_access(&self, name: &str) -> Result<(), StoreError> {
        self.end_sessions(name, &Which::All).await?;
        self.revoke_api_tokens(name).await?;
        Ok(())
    }

    /// The open sessions of `name`, oldest first: when each was opened,
    /// when it expires, and a short id (the first characters of the
    /// SHA-256 the store keeps, never the cookie's secret) to end it with
    /// [`Store::end_sessions`].
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store) -> Result<(), crew_runtime::store::StoreError> {
    /// for session in store.sessions("alice").await? {
    ///     println!("{} opened {:?}, expires {:?}", session.id, session.created_at, session.expires_at);
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn sessions(&self, name: &str) -> Result<Vec<Credential>, StoreError> {
        let sql = "SELECT id_hash, created_at, expires_at FROM crew_sessions \
                   WHERE approver = $1 AND expires_at > $2 ORDER BY created_at, id_hash";
        let rows: Vec<(String, i64, i64)> = on_pool!(self, |pool| {
            sqlx::query_as(sql)
                .bind(name)
                .bind(now_millis())
                .fetch_all(pool)
                .await?
        });
        Ok(rows
            .into_iter()
            .map(|(hash, created, expires)| Credential::of(&hash, created, Some(expires)))
            .collect())
    }

    /// Ends sessions of `name`: all of them, or those whose short id
    /// (as [`Store::sessions`] shows it) starts with a prefix; returns how
    /// many ended. Each ends at once, on every replica, and so does a live
    /// stream of the inbox opened with it.
    ///
    /// Errors: a prefix shorter than 4 characters or matching more than
    /// one session ([`StoreError::Account`] says so; nothing is ended),
    /// the store failing.
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store) -> Result<(), crew_runtime::store::StoreError> {
    /// use crew_runtime::store::Which;
    /// let ended = store.end_sessions("alice", &Which::Prefix("3f9a01".into())).await?;
    /// assert!(ended <= 1);
    /// store.end_sessions("alice", &Which::All).await?;
    /// assert!(store.sessions("alice").await?.is_empty());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn end_sessions(&self, name: &str, which: &Which) -> Result<u64, StoreError> {
        let prefix = match which {
            Which::All => {
                let sql = "DELETE FROM crew_sessions WHERE approver = $1";
                let ended = on_pool!(self, |pool| {
                    sqlx::query(sql)
                        .bind(name)
                        .execute(pool)
                        .await?
                        .rows_affected()
                });
                // Live streams check their session on each change.
                self.announce("").await;
                return Ok(ended);
            }
            Which::Prefix(prefix) => prefix,
        };
        let ids: Vec<String> = self
            .sessions(name)
            .await?
            .into_iter()
            .map(|session| session.id)
            .collect();
        let Some(id) = pick(name, "session", prefix, &ids)? else {
            return Ok(0);
        };
        let sql = "DELETE FROM crew_sessions WHERE approver = $1 AND id_hash LIKE $2";
        let ended = on_pool!(self, |pool| {
            sqlx::query(sql)
                .bind(name)
                .bind(format!("{id}%"))
                .execute(pool)
                .await?
                .rows_affected()
        });
        self.announce("").await;
        Ok(ended)
    }

    /// The bearer tokens of `name` not revoked, oldest first: when each
    /// was issued and a short id (the first characters of its SHA-256,
    /// never the token) to revoke it with [`Store::revoke_api_token`].
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store) -> Result<(), crew_runtime::store::StoreError> {
    /// for token in store.api_tokens("payments-bot").await? {
    ///     println!("{} issued {:?}", token.id, token.created_at);
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn api_tokens(&self, name: &str) -> Result<Vec<Credential>, StoreError> {
        let sql = "SELECT token_hash, created_at FROM crew_approver_tokens \
                   WHERE approver = $1 AND kind = 'api' AND used_at IS NULL \
                   ORDER BY created_at, token_hash";
        let rows: Vec<(String, i64)> = on_pool!(self, |pool| {
            sqlx::query_as(sql).bind(name).fetch_all(pool).await?
        });
        Ok(rows
            .into_iter()
            .map(|(hash, created)| Credential::of(&hash, created, None))
            .collect())
    }

    /// Revokes bearer tokens of `name`: all of them (as
    /// [`Store::revoke_api_tokens`]), or the one whose short id (as
    /// [`Store::api_tokens`] shows it) starts with a prefix; returns how
    /// many were revoked. A revoked token is refused at once, on every
    /// replica.
    ///
    /// Errors: a prefix shorter than 4 characters or matching more than
    /// one token (nothing is revoked), the store failing.
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store) -> Result<(), crew_runtime::store::StoreError> {
    /// use crew_runtime::store::Which;
    /// let revoked = store.revoke_api_token("payments-bot", &Which::Prefix("c0ffee".into())).await?;
    /// println!("{revoked} revoked");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn revoke_api_token(&self, name: &str, which: &Which) -> Result<u64, StoreError> {
        let prefix = match which {
            Which::All => return self.revoke_api_tokens(name).await,
            Which::Prefix(prefix) => {
                let ids: Vec<String> = self
                    .api_tokens(name)
                    .await?
                    .into_iter()
                    .map(|token| token.id)
                    .collect();
                pick(name, "bearer token", prefix, &ids)?
            }
        };
        let Some(prefix) = prefix else { return Ok(0) };
        let sql = "UPDATE crew_approver_tokens SET used_at = $3 \
                   WHERE approver = $1 AND kind = 'api' AND used_at IS NULL AND token_hash LIKE $2";
        Ok(on_pool!(self, |pool| {
            sqlx::query(sql)
                .bind(name)
                .bind(format!("{prefix}%"))
                .bind(now_millis())
                .execute(pool)
                .await?
                .rows_affected()
        }))
    }

    /// The approver named `name`, if there is one.
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store) -> Result<(), crew_runtime::store::StoreError> {
    /// assert!(store.approver("nobody").await?.is_none());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn approver(&self, name: &str) -> Result<Option<Approver>, StoreError> {
        let sql = "SELECT name, tools, capabilities FROM crew_approvers \
                   WHERE name = $1 AND disabled_at IS NULL";
        let row: Option<ApproverRow> = on_pool!(self, |pool| {
            sqlx::query_as(sql).bind(name).fetch_optional(pool).await?
        });
        row.map(|(name, tools, capabilities)| approver_of(name, tools, capabilities))
            .transpose()
    }

    /// The approver, when `password` is theirs; `None` for a wrong
    /// password, an unknown name or an account without a password. Takes
    /// the same time in every case (an argon2 verification), so that
    /// nobody learns which names exist.
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store) -> Result<(), crew_runtime::store::StoreError> {
    /// match store.check_password("alice", "correct horse battery").await? {
    ///     Some(alice) => println!("signed in as {}", alice.name),
    ///     None => println!("wrong name or password"),
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn check_password(
        &self,
        name: &str,
        password: &str,
    ) -> Result<Option<Approver>, StoreError> {
        let sql = "SELECT name, tools, capabilities, password_hash FROM crew_approvers \
                   WHERE name = $1 AND disabled_at IS NULL";
        let row: Option<ApproverRowWith<Option<String>>> = on_pool!(self, |pool| {
            sqlx::query_as(sql).bind(name).fetch_optional(pool).await?
        });
        let (account, hash) = match row {
            Some((name, tools, capabilities, hash)) => (Some((name, tools, capabilities)), hash),
            None => (None, None),
        };
        // An over-long password is checked against the dummy hash (but
        // never matches), so that it costs the same as any other.
        let (password, hash) = if password.len() > MAX_PASSWORD_BYTES {
            ("", None)
        } else {
            (password, hash)
        };
        if !verify_password(password, hash).await? {
            return Ok(None);
        }
        account
            .map(|(name, tools, capabilities)| approver_of(name, tools, capabilities))
            .transpose()
    }

    /// A one-time sign-in token for `name`, valid for `ttl`: give it to
    /// the approver by a channel you trust. Only its SHA-256 is stored.
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store) -> Result<(), crew_runtime::store::StoreError> {
    /// use std::time::Duration;
    /// let token = store.issue_sign_in_token("alice", Duration::from_secs(15 * 60)).await?;
    /// println!("sign in with {token}");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn issue_sign_in_token(
        &self,
        name: &str,
        ttl: Duration,
    ) -> Result<String, StoreError> {
        self.issue_token(name, "sign-in", Some(ttl)).await
    }

    /// The approver a sign-in token was issued for, marking it used: a
    /// token signs in once, before it expires. `None` for an unknown,
    /// used or expired token.
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store, token: &str) -> Result<(), crew_runtime::store::StoreError> {
    /// if let Some(approver) = store.redeem_sign_in_token(token).await? {
    ///     println!("welcome, {}", approver.name);
    /// }
    /// assert!(store.redeem_sign_in_token(token).await?.is_none());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn redeem_sign_in_token(&self, token: &str) -> Result<Option<Approver>, StoreError> {
        // One statement marks it used only if it was not: of two requests
        // racing with the same token, one gets the row.
        let sql = "UPDATE crew_approver_tokens SET used_at = $2 \
                   WHERE token_hash = $1 AND kind = 'sign-in' AND used_at IS NULL AND expires_at > $2 \
                   RETURNING approver";
        let hash = secret_hash(token);
        let name: Option<String> = on_pool!(self, |pool| {
            sqlx::query_scalar(sql)
                .bind(&hash)
                .bind(now_millis())
                .fetch_optional(pool)
                .await?
        });
        match name {
            Some(name) => self.approver(&name).await,
            None => Ok(None),
        }
    }

    /// A bearer token for `name` (for a chat bot using the inbox's JSON
    /// API): valid until revoked ([`Store::revoke_api_tokens`]). Only its
    /// SHA-256 is stored.
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store) -> Result<(), crew_runtime::store::StoreError> {
    /// let token = store.issue_api_token("payments-bot").await?;
    /// println!("Authorization: Bearer {token}");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn issue_api_token(&self, name: &str) -> Result<String, StoreError> {
        self.issue_token(name, "api", None).await
    }

    /// The approver a bearer token was issued for, if it is one.
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store, token: &str) -> Result<(), crew_runtime::store::StoreError> {
    /// let bot = store.api_token_approver(token).await?;
    /// # let _ = bot;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn api_token_approver(&self, token: &str) -> Result<Option<Approver>, StoreError> {
        let sql = "SELECT a.name, a.tools, a.capabilities FROM crew_approver_tokens t \
                   JOIN crew_approvers a ON a.name = t.approver \
                   WHERE t.token_hash = $1 AND t.kind = 'api' AND t.used_at IS NULL \
                   AND a.disabled_at IS NULL";
        let hash = secret_hash(token);
        let row: Option<ApproverRow> = on_pool!(self, |pool| {
            sqlx::query_as(sql).bind(&hash).fetch_optional(pool).await?
        });
        row.map(|(name, tools, capabilities)| approver_of(name, tools, capabilities))
            .transpose()
    }

    /// Revokes every bearer token of `name`; returns how many there were.
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store) -> Result<(), crew_runtime::store::StoreError> {
    /// let revoked = store.revoke_api_tokens("payments-bot").await?;
    /// println!("{revoked} tokens revoked");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn revoke_api_tokens(&self, name: &str) -> Result<u64, StoreError> {
        let sql = "UPDATE crew_approver_tokens SET used_at = $2 \
                   WHERE approver = $1 AND kind = 'api' AND used_at IS NULL";
        Ok(on_pool!(self, |pool| {
            sqlx::query(sql)
                .bind(name)
                .bind(now_millis())
                .execute(pool)
                .await?
                .rows_affected()
        }))
    }

    /// Stores the hash of a new token of `kind` for `name`.
    async fn issue_token(
        &self,
        name: &str,
        kind: &str,
        ttl: Option<Duration>,
    ) -> Result<String, StoreError> {
        if self.approver(name).await?.is_none() {
            return Err(unknown_approver(name));
        }
        let token = new_secret()?;
        let now = now_millis();
        let expires = ttl.map(|ttl| now.saturating_add(millis_in(ttl)));
        let sql = "INSERT INTO crew_approver_tokens (token_hash, approver, kind, created_at, expires_at) \
                   VALUES ($1, $2, $3, $4, $5)";
        on_pool!(self, |pool| {
            sqlx::query(sql)
                .bind(secret_hash(&token))
                .bind(name)
                .bind(kind)
                .bind(now)
                .bind(expires)
                .execute(pool)
                .await?;
        });
        Ok(token)
    }

    /// Opens a session of `name` for `ttl`: returns the session token (the
    /// cookie's value; only its SHA-256 is stored) and the session's CSRF
    /// token (put in every form).
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store) -> Result<(), crew_runtime::store::StoreError> {
    /// use std::time::Duration;
    /// let (session, csrf) = store.create_session("alice", Duration::from_secs(8 * 3600)).await?;
    /// assert_ne!(session, csrf);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn create_session(
        &self,
        name: &str,
        ttl: Duration,
    ) -> Result<(String, String), StoreError> {
        if self.approver(name).await?.is_none() {
            return Err(unknown_approver(name));
        }
        let token = new_secret()?;
        let csrf = new_secret()?;
        let now = now_millis();
        let insert = "INSERT INTO crew_sessions (id_hash, approver, csrf_token, created_at, expires_at) \
                      VALUES ($1, $2, $3, $4, $5)";
        // Expired sessions are of no use to anyone: drop them on the way.
        let sweep = "DELETE FROM crew_sessions WHERE expires_at <= $1";
        on_pool!(self, |pool| {
            sqlx::query(sweep).bind(now).execute(pool).await?;
            sqlx::query(insert)
                .bind(secret_hash(&token))
                .bind(name)
                .bind(&csrf)
                .bind(now)
                .bind(now.saturating_add(millis_in(ttl)))
                .execute(pool)
                .await?;
        });
        Ok((token, csrf))
    }

    /// The approver and CSRF token of an open session; `None` for an
    /// unknown, ended or expired one.
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store, cookie: &str) -> Result<(), crew_runtime::store::StoreError> {
    /// if let Some((approver, _csrf)) = store.session(cookie).await? {
    ///     println!("{} is signed in", approver.name);
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn session(&self, token: &str) -> Result<Option<(Approver, String)>, StoreError> {
        let sql = "SELECT a.name, a.tools, a.capabilities, s.csrf_token FROM crew_sessions s \
                   JOIN crew_approvers a ON a.name = s.approver \
                   WHERE s.id_hash = $1 AND s.expires_at > $2 AND a.disabled_at IS NULL";
        let hash = secret_hash(token);
        let row: Option<ApproverRowWith<String>> = on_pool!(self, |pool| {
            sqlx::query_as(sql)
                .bind(&hash)
                .bind(now_millis())
                .fetch_optional(pool)
                .await?
        });
        row.map(|(name, tools, capabilities, csrf)| {
            approver_of(name, tools, capabilities).map(|approver| (approver, csrf))
        })
        .transpose()
    }

    /// Ends a session (signing out); ending an unknown one does nothing.
    ///
    /// ```no_run
    /// # async fn run(store: crew_runtime::store::Store, cookie: &str) -> Result<(), crew_runtime::store::StoreError> {
    /// store.end_session(cookie).await?;
    /// assert!(store.session(cookie).await?.is_none());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn end_session(&self, token: &str) -> Result<(), StoreError> {
        let sql = "DELETE FROM crew_sessions WHERE id_hash = $1";
        let hash = secret_hash(token);
        on_pool!(self, |pool| {
            sqlx::query(sql).bind(&hash).execute(pool).await?;
        });
        // Live streams check their session on each change: say one
        // happened, here and on every replica.
        self.announce("").await;
        Ok(())
    }
}

/// How one kind of sign-in throttle key is held back: `free_failures`
/// failures within `window` of each other are let be; each further one
/// locks the key for `first_lockout`, doubled per failure, at most
/// `max_lockout`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ThrottleRule {
    pub(crate) free_failures: u32,
    pub(crate) first_lockout: Duration,
    pub(crate) max_lockout: Duration,
    pub(crate) window: Duration,
}

impl ThrottleRule {
    /// How long the `failures`-th failure in a row locks its key.
    fn lockout(&self, failures: i64) -> Duration {
        let beyond = failures.saturating_sub(i64::from(self.free_failures));
        if beyond <= 0 {
            return Duration::ZERO;
        }
        let doublings = u32::try_from(beyond - 1).unwrap_or(u32::MAX).min(30);
        self.first_lockout
            .saturating_mul(1 << doublings)
            .min(self.max_lockout)
    }
}

impl Store {
    /// Until when (milliseconds since the epoch) the sign-in throttle
    /// refuses attempts of any of `keys`, when that is later than now.
    pub(crate) async fn sign_in_locked_until(
        &self,
        keys: &[String],
    ) -> Result<Option<i64>, StoreError> {
        let sql = "SELECT locked_until FROM crew_sign_in_throttle \
                   WHERE key_hash = $1 AND locked_until > $2";
        let now = now_millis();
        let mut latest: Option<i64> = None;
        for key in keys {
            let until: Option<i64> = on_pool!(self, |pool| {
                sqlx::query_scalar(sql)
                    .bind(secret_hash(key))
                    .bind(now)
                    .fetch_optional(pool)
                    .await?
            });
            latest = latest.max(until);
        }
        Ok(latest)
    }

    /// Counts a failed sign-in of `key` (in one statement, so that
    /// replicas failing at once all count) and locks the key as `rule`
    /// says. Counts older than the rule's window are dropped on the way.
    pub(crate) async fn record_sign_in_failure(
        &self,
        key: &str,
        rule: ThrottleRule,
    ) -> Result<(), StoreError> {
        let now = now_millis();
        let window_start = now.saturating_sub(millis_in(rule.window));
        let count = "INSERT INTO crew_sign_in_throttle (key_hash, failures, last_failure_at, locked_until) \
                     VALUES ($1, 1, $2, 0) \
                     ON CONFLICT (key_hash) DO UPDATE SET \
                     failures = CASE WHEN crew_sign_in_throttle.last_failure_at < $3 THEN 1 \
                                ELSE crew_sign_in_throttle.failures + 1 END, \
                     last_failure_at = $2 \
                     RETURNING failures";
        let lock = "UPDATE crew_sign_in_throttle SET locked_until = $2 \
                    WHERE key_hash = $1 AND locked_until < $2";
        let sweep = "DELETE FROM crew_sign_in_throttle \
                     WHERE last_failure_at < $1 AND locked_until < $2";
        let hash = secret_hash(key);
        let failures: i64 = on_pool!(self, |pool| {
            sqlx::query(sweep)
                .bind(window_start)
                .bind(now)
                .execute(pool)
                .await?;
            sqlx::query_scalar(count)
                .bind(&hash)
                .bind(now)
                .bind(window_start)
                .fetch_one(pool)
                .await?
        });
        let lockout = rule.lockout(failures);
        if !lockout.is_zero() {
            let until = now.saturating_add(millis_in(lockout));
            on_pool!(self, |pool| {
                sqlx::query(lock)
                    .bind(&hash)
                    .bind(until)
                    .execute(pool)
                    .await?;
            });
        }
        Ok(())
    }

    /// Forgets the failed sign-ins of `key` (after a success).
    pub(crate) async fn clear_sign_in_failures(&self, key: &str) -> Result<(), StoreError> {
        let sql = "DELETE FROM crew_sign_in_throttle WHERE key_hash = $1";
        let hash = secret_hash(key);
        on_pool!(self, |pool| {
            sqlx::query(sql).bind(&hash).execute(pool).await?;
        });
        Ok(())
    }
}

/// How many hex characters of a stored hash name a session or token.
const SHORT_ID_CHARS: usize = 12;

/// The fewest characters of a short id that pick a session or token.
const MIN_PREFIX_CHARS: usize = 4;

/// Which of an approver's sessions or tokens to end.
///
/// ```
/// use crew_runtime::store::Which;
/// let one = Which::Prefix("3f9a01".into());
/// assert_ne!(one, Which::All);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Which {
    /// Every one of them.
    All,
    /// The one whose short id starts with this (at least 4 characters).
    Prefix(String),
}

/// A session or bearer token as listed: never its secret.
///
/// ```no_run
/// # async fn run(store: crew_runtime::store::Store) -> Result<(), crew_runtime::store::StoreError> {
/// let sessions: Vec<crew_runtime::store::Credential> = store.sessions("alice").await?;
/// println!("alice has {} sessions", sessions.len());
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Credential {
    /// A short id: the first 12 hex characters of the SHA-256 the store
    /// keeps of the secret (which the secret cannot be found from).
    pub id: String,
    /// When it was opened or issued.
    pub created_at: std::time::SystemTime,
    /// When it expires (sessions); `None`: when revoked (bearer tokens).
    pub expires_at: Option<std::time::SystemTime>,
}

impl Credential {
    fn of(hash: &str, created: i64, expires: Option<i64>) -> Self {
        Credential {
            id: hash.chars().take(SHORT_ID_CHARS).collect(),
            created_at: super::time_of(created),
            expires_at: expires.map(super::time_of),
        }
    }
}

/// The one short id among `ids` that starts with `prefix`: `None` when
/// none does; an error when the prefix is too short, not hex, or picks
/// several.
fn pick(
    name: &str,
    what: &str,
    prefix: &str,
    ids: &[String],
) -> Result<Option<String>, StoreError> {
    let prefix = prefix.trim().to_ascii_lowercase();
    if prefix.len() < MIN_PREFIX_CHARS || !prefix.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(StoreError::Account(format!(
            "{prefix:?} is no {what} id: give at least {MIN_PREFIX_CHARS} hex characters of one that is listed"
        )));
    }
    let matching: Vec<&String> = ids.iter().filter(|id| id.starts_with(&prefix)).collect();
    match matching.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some((*one).clone())),
        many => Err(StoreError::Account(format!(
            "{prefix:?} starts {} {what} ids of {name:?}: give more characters (nothing was ended)",
            many.len()
        ))),
    }
}

fn unknown_approver(name: &str) -> StoreError {
    StoreError::Account(format!("no approver is named {name:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn store() -> (Store, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let url = format!("sqlite://{}", dir.path().join("accounts.db").display());
        let store = Store::connect(&url).await.expect("the store opens");
        (store, dir)
    }

    #[tokio::test]
    async fn passwords_are_stored_as_argon2id_hashes_and_checked() {
        let (store, _dir) = store().await;
        store
            .add_approver("alice", Some("correct horse"), ApproverScope::everything())
            .await
            .expect("alice is added");
        let stored: Option<String> = on_pool!(store, |pool| {
            sqlx::query_scalar("SELECT password_hash FROM crew_approvers WHERE name = 'alice'")
                .fetch_one(pool)
                .await
                .expect("the row")
        });
        let stored = stored.expect("a hash");
        assert!(stored.starts_with("$argon2id$"), "{stored}");
        assert!(!stored.contains("correct horse"));
        let alice = store
            .check_password("alice", "correct horse")
            .await
            .expect("checked");
        assert_eq!(alice.map(|a| a.name), Some("alice".to_owned()));
        assert!(
            store
                .check_password("alice", "wrong horse")
                .await
                .expect("checked")
                .is_none()
        );
        assert!(
            store
                .check_password("mallory", "correct horse")
                .await
                .expect("checked")
                .is_none()
        );
        store
            .set_password("alice", Some("another passphrase"))
            .await
            .expect("changed");
        assert!(
            store
                .check_password("alice", "correct horse")
                .await
                .expect("checked")
                .is_none()
        );
        store.set_password("alice", None).await.expect("removed");
        assert!(
            store
                .check_password("alice", "another passphrase")
                .await
                .expect("checked")
                .is_none()
        );
    }

    #[tokio::test]
    async fn bad_names_passwords_and_duplicates_are_refused_clearly() {
        let (store, _dir) = store().await;
        for bad in ["", " alice", "al\nice", "al\u{7}ice"] {
            let error = store
                .add_approver(bad, None, ApproverScope::everything())
                .await
                .expect_err("refused");
            assert!(error.to_string().contains("cannot be used"), "{error}");
        }
        let error = store
            .add_approver("bob", Some("short"), ApproverScope::everything())
            .await
            .expect_err("refused");
        assert!(error.to_string().contains("too short"), "{error}");
        store
            .add_approver("bob", None, ApproverScope::everything())
            .await
            .expect("added");
        let error = store
            .add_approver("bob", None, ApproverScope::everything())
            .await
            .expect_err("refused");
        assert!(error.to_string().contains("exists already"), "{error}");
        let error = store
            .set_password("carol", Some("long enough"))
            .await
            .expect_err("refused");
        assert!(error.to_string().contains("no approver"), "{error}");
    }

    #[tokio::test]
    async fn an_account_whose_name_can_be_mistaken_for_anothers_is_refused() {
        let (store, _dir) = store().await;
        for name in ["carol", "Jos\u{e9}", "paypal"] {
            store
                .add_approver(name, None, ApproverScope::everything())
                .await
                .expect("added");
        }
        // Case, NFD against NFC, full-width letters, a Cyrillic `а`.
        for look_alike in [
            "Carol",
            "CAROL",
            "Jose\u{301}",
            "\u{ff43}arol",
            "p\u{430}yp\u{430}l",
        ] {
            let error = store
                .add_approver(look_alike, None, ApproverScope::everything())
                .await
                .expect_err("refused");
            assert!(
                error.to_string().contains("mistaken for"),
                "{look_alike}: {error}"
            );
        }
        store
            .add_approver("caroline", None, ApproverScope::everything())
            .await
            .expect("a name that reads differently is added");
    }

    #[tokio::test]
    async fn a_sign_in_token_is_redeemed_once_and_not_after_it_expires() {
        let (store, _dir) = store().await;
        store
            .add_approver(
                "alice",
                None,
                ApproverScope::everything().tools(["Send Email"]),
            )
            .await
            .expect("added");
        let token = store
            .issue_sign_in_token("alice", Duration::from_secs(60))
            .await
            .expect("issued");
        assert!(token.len() >= 43, "256 bits: {token}");
        let stored: Vec<String> = on_pool!(store, |pool| {
            sqlx::query_scalar("SELECT token_hash FROM crew_approver_tokens")
                .fetch_all(pool)
                .await
                .expect("rows")
        });
        assert_eq!(stored, vec![secret_hash(&token)]);
        let alice = store
            .redeem_sign_in_token(&token)
            .await
            .expect("redeemed")
            .expect("alice");
        assert_eq!(alice.tools, Some(vec!["send_email".to_owned()]));
        assert!(
            store
                .redeem_sign_in_token(&token)
                .await
                .expect("checked")
                .is_none(),
            "a second use is refused"
        );
        let short = store
            .issue_sign_in_token("alice", Duration::from_millis(1))
            .await
            .expect("issued");
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(
            store
                .redeem_sign_in_token(&short)
                .await
                .expect("checked")
                .is_none(),
            "an expired token is refused"
        );
        assert!(
            store
                .issue_sign_in_token("mallory", Duration::from_secs(60))
                .await
                .is_err()
        );
        // A sign-in token is no bearer token, nor the reverse.
        let api = store.issue_api_token("alice").await.expect("issued");
        assert!(
            store
                .redeem_sign_in_token(&api)
                .await
                .expect("ok")
                .is_none()
        );
        let again = store
            .issue_sign_in_token("alice", Duration::from_secs(60))
            .await
            .expect("issued");
        assert!(
            store
                .api_token_approver(&again)
                .await
                .expect("ok")
                .is_none()
        );
        assert_eq!(
            store
                .api_token_approver(&api)
                .await
                .expect("ok")
                .map(|a| a.name),
            Some("alice".to_owned())
        );
        assert_eq!(store.revoke_api_tokens("alice").await.expect("ok"), 1);
        assert!(store.api_token_approver(&api).await.expect("ok").is_none());
    }

    #[tokio::test]
    async fn sessions_expire_and_end() {
        let (store, _dir) = store().await;
        store
            .add_approver("alice", None, ApproverScope::everything())
            .await
            .expect("added");
        let (token, csrf) = store
            .create_session("alice", Duration::from_secs(60))
            .await
            .expect("opened");
        let (alice, stored_csrf) = store.session(&token).await.expect("read").expect("open");
        assert_eq!((alice.name.as_str(), stored_csrf), ("alice", csrf));
        store.end_session(&token).await.expect("ended");
        assert!(store.session(&token).await.expect("read").is_none());
        let (short, _) = store
            .create_session("alice", Duration::from_millis(1))
            .await
            .expect("opened");
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(store.session(&short).await.expect("read").is_none());
        assert!(store.session("made-up").await.expect("read").is_none());
    }

    #[test]
    fn scope_limits_tools_and_capabilities() {
        use hooks_core::Capabilities;
        let question = |tool: &str, capabilities: Capabilities| Question {
            capabilities,
            ..Question::for_tests(tool)
        };
        let destructive = Capabilities::NONE.with(Capability::Destructive);
        let reader = Capabilities::NONE.with(Capability::ReadOnly);
        let payments = Approver::new("p", ApproverScope::everything().tools(["SendPayment"]));
        assert!(payments.may_answer(&question("send_payment", reader)));
        assert!(!payments.may_answer(&question("delete_file", destructive)));
        let cleaner = Approver::new(
            "c",
            ApproverScope::everything().capabilities([Capability::Destructive]),
        );
        assert!(cleaner.may_answer(&question("delete_file", destructive)));
        assert!(!cleaner.may_answer(&question("read_file", reader)));
        let anyone = Approver::new("a", ApproverScope::everything());
        assert!(anyone.may_answer(&question("read_file", reader)));
        assert_eq!(anyone.scope_description(), "any tool");
    }

    #[test]
    fn lockouts_double_from_the_first_up_to_the_cap() {
        let rule = ThrottleRule {
            free_failures: 3,
            first_lockout: Duration::from_secs(1),
            max_lockout: Duration::from_secs(900),
            window: Duration::from_secs(3600),
        };
        let lockouts: Vec<u64> = (1..=6).map(|n| rule.lockout(n).as_secs()).collect();
        assert_eq!(lockouts, [0, 0, 0, 1, 2, 4]);
        assert_eq!(rule.lockout(200), Duration::from_secs(900));
        assert_eq!(rule.lockout(i64::MAX), Duration::from_secs(900));
    }

    #[tokio::test]
    async fn failures_beyond_the_allowance_lock_a_key_and_a_success_clears_it() {
        let (store, _dir) = store().await;
        let rule = ThrottleRule {
            free_failures: 2,
            first_lockout: Duration::from_secs(60),
            max_lockout: Duration::from_secs(60),
            window: Duration::from_secs(3600),
        };
        let keys = ["account:alice".to_owned(), "address:192.0.2.1".to_owned()];
        for _ in 0..2 {
            store
                .record_sign_in_failure(&keys[0], rule)
                .await
                .expect("counted");
            assert!(
                store
                    .sign_in_locked_until(&keys)
                    .await
                    .expect("read")
                    .is_none()
            );
        }
        store
            .record_sign_in_failure(&keys[0], rule)
            .await
            .expect("counted");
        let until = store.sign_in_locked_until(&keys).await.expect("read");
        assert!(until.is_some_and(|until| until > now_millis()), "{until:?}");
        assert!(
            store
                .sign_in_locked_until(&keys[1..])
                .await
                .expect("read")
                .is_none()
        );
        store
            .clear_sign_in_failures(&keys[0])
            .await
            .expect("cleared");
        assert!(
            store
                .sign_in_locked_until(&keys)
                .await
                .expect("read")
                .is_none()
        );
    }

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abc", "abd"));
        assert!(!same_secret("abc", "abcd"));
        assert_eq!(secret_hash("abc").len(), 64);
    }
}
