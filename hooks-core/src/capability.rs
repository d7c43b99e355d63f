//! What a tool declares about its effects: the MCP tool annotations
//! (read-only, destructive, idempotent, open-world, title), which any tool
//! can declare too, and the capabilities a hook filter or a guard matches.
//!
//! Annotations are *hints* from whoever wrote the tool, and a tool of an
//! MCP server is as trustworthy as the server. Read them the way the MCP
//! specification says, which is also the safe way: a tool that declares
//! nothing may modify its environment, may do so destructively, is not
//! idempotent and reaches the open world. A guard on
//! [`Capability::Destructive`] therefore stops every tool that does not
//! say it is read-only or additive.

use std::fmt;

/// What a tool declares about its effects, as MCP tool annotations do.
///
/// Each flag is `None` when the tool does not say; the `is_*` methods
/// read an absent flag with the MCP defaults (see the module
/// documentation), and [`capabilities`](Self::capabilities) gathers them.
///
/// ```
/// use hooks_core::{Capability, ToolAnnotations};
///
/// let reader = ToolAnnotations::new().read_only(true).title("Read a file");
/// assert!(reader.is_read_only() && !reader.is_destructive());
/// assert!(reader.capabilities().contains(Capability::ReadOnly));
///
/// // Nothing declared: may modify, destructively, the open world.
/// let unknown = ToolAnnotations::new();
/// assert!(unknown.is_destructive() && unknown.is_open_world());
/// assert!(!unknown.is_read_only() && !unknown.is_idempotent());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct ToolAnnotations {
    /// A human-readable title.
    pub title: Option<String>,
    /// The tool does not modify its environment (MCP `readOnlyHint`;
    /// absent means it may).
    pub read_only: Option<bool>,
    /// The tool may destroy or overwrite, not only add (MCP
    /// `destructiveHint`; absent means it may; ignored for a read-only
    /// tool unless `true`, which makes it destructive and not read-only).
    pub destructive: Option<bool>,
    /// Calling the tool again with the same arguments has no further
    /// effect (MCP `idempotentHint`; absent means it may have one).
    pub idempotent: Option<bool>,
    /// The tool reaches entities outside a closed domain: the web, other
    /// people (MCP `openWorldHint`; absent means it does).
    pub open_world: Option<bool>,
}

/// The annotations of a tool that declares nothing.
pub(crate) static UNDECLARED: ToolAnnotations = ToolAnnotations {
    title: None,
    read_only: None,
    destructive: None,
    idempotent: None,
    open_world: None,
};

impl ToolAnnotations {
    /// Nothing declared (every flag `None`).
    pub fn new() -> Self {
        ToolAnnotations::default()
    }

    /// Sets the title.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// Declares whether the tool only reads.
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.read_only = Some(read_only);
        self
    }

    /// Declares whether the tool may destroy or overwrite.
    pub fn destructive(mut self, destructive: bool) -> Self {
        self.destructive = Some(destructive);
        self
    }

    /// Declares whether a repeated call has no further effect.
    pub fn idempotent(mut self, idempotent: bool) -> Self {
        self.idempotent = Some(idempotent);
        self
    }

    /// Declares whether the tool reaches the open world.
    pub fn open_world(mut self, open_world: bool) -> Self {
        self.open_world = Some(open_world);
        self
    }

    /// The tool says it does not modify its environment, and does not
    /// also say it is destructive: contradictory annotations read the safe
    /// way, as destructive and not read-only.
    ///
    /// ```
    /// use hooks_core::ToolAnnotations;
    ///
    /// let contradictory = ToolAnnotations::new().read_only(true).destructive(true);
    /// assert!(!contradictory.is_read_only() && contradictory.is_destructive());
    /// ```
    pub fn is_read_only(&self) -> bool {
        self.read_only == Some(true) && self.destructive != Some(true)
    }

    /// The tool may destroy or overwrite: it says so, or it is not
    /// read-only and does not say its updates are only additive.
    pub fn is_destructive(&self) -> bool {
        self.destructive == Some(true) || (!self.is_read_only() && self.destructive != Some(false))
    }

    /// A repeated call has no further effect: the tool is read-only, or
    /// says it is idempotent.
    pub fn is_idempotent(&self) -> bool {
        self.is_read_only() || self.idempotent == Some(true)
    }

    /// The tool may reach the open world: it does not say its domain is
    /// closed.
    pub fn is_open_world(&self) -> bool {
        self.open_world != Some(false)
    }

    /// The capabilities these annotations amount to.
    pub fn capabilities(&self) -> Capabilities {
        let mut set = Capabilities::NONE;
        for (capability, has) in [
            (Capability::ReadOnly, self.is_read_only()),
            (Capability::Destructive, self.is_destructive()),
            (Capability::Idempotent, self.is_idempotent()),
            (Capability::OpenWorld, self.is_open_world()),
        ] {
            if has {
                set = set.with(capability);
            }
        }
        set
    }
}

/// One thing a tool may do, as its [`ToolAnnotations`] declare (read with
/// the MCP defaults). A hook filter names them in an attribute as
/// `capabilities = [destructive, open_world]`.
///
/// ```
/// use hooks_core::Capability;
/// assert_eq!(Capability::from_name("open_world"), Some(Capability::OpenWorld));
/// assert_eq!(Capability::Destructive.name(), "destructive");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Capability {
    /// Does not modify its environment.
    ReadOnly,
    /// May destroy or overwrite.
    Destructive,
    /// A repeated call has no further effect.
    Idempotent,
    /// Reaches the open world.
    OpenWorld,
}

impl Capability {
    /// Every capability, in declaration order.
    pub const ALL: [Capability; 4] = [
        Capability::ReadOnly,
        Capability::Destructive,
        Capability::Idempotent,
        Capability::OpenWorld,
    ];

    /// The name an attribute filter uses (`read_only`, `destructive`,
    /// `idempotent`, `open_world`).
    pub const fn name(self) -> &'static str {
        match self {
            Capability::ReadOnly => "read_only",
            Capability::Destructive => "destructive",
            Capability::Idempotent => "idempotent",
            Capability::OpenWorld => "open_world",
        }
    }

    /// The capability an attribute filter names, if any.
    pub fn from_name(name: &str) -> Option<Capability> {
        Capability::ALL.into_iter().find(|c| c.name() == name)
    }

    const fn bit(self) -> u8 {
        1 << self as u8
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A set of [`Capability`] values (a bit set: `Copy`, one byte).
///
/// ```
/// use hooks_core::{Capabilities, Capability};
///
/// let risky: Capabilities = [Capability::Destructive, Capability::OpenWorld].into_iter().collect();
/// assert!(risky.contains(Capability::OpenWorld));
/// assert!(risky.intersects(Capabilities::NONE.with(Capability::Destructive)));
/// assert_eq!(risky.to_string(), "destructive, open_world");
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Capabilities(u8);

impl Capabilities {
    /// The empty set.
    pub const NONE: Capabilities = Capabilities(0);

    /// This set with `capability` added.
    #[must_use]
    pub const fn with(self, capability: Capability) -> Capabilities {
        Capabilities(self.0 | capability.bit())
    }

    /// Whether `capability` is in the set.
    pub const fn contains(self, capability: Capability) -> bool {
        self.0 & capability.bit() != 0
    }

    /// Whether the two sets share a capability.
    pub const fn intersects(self, other: Capabilities) -> bool {
        self.0 & other.0 != 0
    }

    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The capabilities in the set, in declaration order.
    pub fn iter(self) -> impl Iterator<Item = Capability> {
        Capability::ALL
            .into_iter()
            .filter(move |c| self.contains(*c))
    }
}

impl FromIterator<Capability> for Capabilities {
    fn from_iter<I: IntoIterator<Item = Capability>>(iter: I) -> Self {
        iter.into_iter()
            .fold(Capabilities::NONE, Capabilities::with)
    }
}

impl fmt::Display for Capabilities {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, capability) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(capability.name())?;
        }
        Ok(())
    }
}

impl fmt::Debug for Capabilities {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn undeclared_annotations_read_with_the_mcp_defaults() {
        let caps = UNDECLARED.capabilities();
        assert_eq!(
            caps,
            [Capability::Destructive, Capability::OpenWorld]
                .into_iter()
                .collect()
        );
    }

    #[test]
    fn a_read_only_tool_is_neither_destructive_nor_repeatable_harm() {
        let caps = ToolAnnotations::new()
            .read_only(true)
            .destructive(false)
            .open_world(false)
            .capabilities();
        assert_eq!(
            caps,
            [Capability::ReadOnly, Capability::Idempotent]
                .into_iter()
                .collect()
        );
        // The destructive hint is meaningless for a read-only tool, unless
        // it says `true`: see below.
        let caps = ToolAnnotations::new()
            .read_only(true)
            .open_world(false)
            .capabilities();
        assert_eq!(
            caps,
            [Capability::ReadOnly, Capability::Idempotent]
                .into_iter()
                .collect()
        );
    }

    #[test]
    fn contradictory_annotations_read_the_safe_way() {
        // Read-only and destructive at once: destructive, not read-only,
        // and so not idempotent either unless it says so.
        let caps = ToolAnnotations::new()
            .read_only(true)
            .destructive(true)
            .open_world(false)
            .capabilities();
        assert_eq!(caps, [Capability::Destructive].into_iter().collect());
        let caps = ToolAnnotations::new()
            .read_only(true)
            .destructive(true)
            .idempotent(true)
            .capabilities();
        assert_eq!(
            caps,
            [
                Capability::Destructive,
                Capability::Idempotent,
                Capability::OpenWorld
            ]
            .into_iter()
            .collect()
        );
    }

    #[test]
    fn additive_idempotent_tools() {
        let caps = ToolAnnotations::new()
            .read_only(false)
            .destructive(false)
            .idempotent(true)
            .capabilities();
        assert_eq!(
            caps,
            [Capability::Idempotent, Capability::OpenWorld]
                .into_iter()
                .collect()
        );
    }

    #[test]
    fn names_round_trip() {
        for capability in Capability::ALL {
            assert_eq!(Capability::from_name(capability.name()), Some(capability));
        }
        assert_eq!(Capability::from_name("destroys"), None);
    }
}
