//! One point's chain of hooks, kept as persistent lists: a new version is
//! made by appending in O(1) (amortized) while every older version stays
//! valid for the dispatches still reading it.
//!
//! Registering one hook therefore costs the same whatever the length of the
//! chain, and a dispatch walks a contiguous run of entries without a lock.

use std::sync::{Arc, OnceLock};

use rpds::HashTrieMapSync;
use rustc_hash::FxBuildHasher;

use crate::hook::{HookEntry, HookOrigin};
use crate::point::Point;

/// A list that later versions extend in place: a version is a shared store
/// and a length. Appending to the newest version fills the next free slot
/// of the shared store (older versions, shorter, never see it); appending
/// to an older version, or to a full store, copies into a store twice the
/// size. Reading a slot is one atomic load.
pub(crate) struct AppendList<T> {
    store: Arc<[OnceLock<T>]>,
    len: usize,
}

impl<T> Clone for AppendList<T> {
    fn clone(&self) -> Self {
        AppendList {
            store: Arc::clone(&self.store),
            len: self.len,
        }
    }
}

impl<T: Clone> AppendList<T> {
    pub(crate) fn new() -> Self {
        AppendList {
            store: Arc::from(Vec::new()),
            len: 0,
        }
    }

    /// This list with `value` appended.
    pub(crate) fn push(&mut self, value: T) {
        let value = match self.store.get(self.len) {
            // The next slot is free in the shared store: fill it. Versions
            // that share the store are no longer than this one, so none of
            // them sees the slot.
            Some(slot) => match slot.set(value) {
                Ok(()) => {
                    self.len += 1;
                    return;
                }
                // Another version already extended the store past here.
                Err(value) => value,
            },
            None => value,
        };
        let capacity = (self.len + 1).max(4) * 2;
        let mut items: Vec<OnceLock<T>> = Vec::with_capacity(capacity);
        items.extend(self.iter().cloned().map(OnceLock::from));
        items.push(OnceLock::from(value));
        items.resize_with(capacity, OnceLock::new);
        self.store = Arc::from(items);
        self.len += 1;
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    pub(crate) fn iter(&self) -> Iter<'_, T> {
        Iter(self.store[..self.len].iter())
    }

    pub(crate) fn last(&self) -> Option<&T> {
        self.iter().next_back()
    }
}

/// The items of one version of an [`AppendList`], in order.
pub(crate) struct Iter<'a, T>(std::slice::Iter<'a, OnceLock<T>>);

impl<'a, T> Iterator for Iter<'a, T> {
    type Item = &'a T;

    #[inline]
    fn next(&mut self) -> Option<&'a T> {
        // Every slot below a version's length was filled before that
        // version existed; an empty one would be skipped, never read torn.
        self.0.by_ref().find_map(OnceLock::get)
    }
}

impl<'a, T> DoubleEndedIterator for Iter<'a, T> {
    #[inline]
    fn next_back(&mut self) -> Option<&'a T> {
        self.0.by_ref().rev().find_map(OnceLock::get)
    }
}

type Entries<P> = AppendList<Arc<HookEntry<P>>>;

/// Tool name → the hooks filtered to it, as a direct-mapped table on the
/// name's hash: a lookup is one probe (the slot the hash's top bits pick)
/// and one comparison of the name, where a general hash map probes a
/// group. Tools whose hashes pick the same slot (rare: the table has at
/// least twice as many slots as tools) share it: the first in place, the
/// others in a list.
struct FlatIndex<P: Point> {
    /// 64 minus log2 of the table's size: `key >> shift` picks the slot.
    shift: u32,
    slots: Box<[Slot<P>]>,
}

/// One slot of a [`FlatIndex`]: a tool in place (no hop to reach it), and
/// the tools whose hashes picked the same slot after it.
struct Slot<P: Point> {
    first: Option<(u64, Name, Entries<P>)>,
    more: Vec<(u64, Name, Entries<P>)>,
}

/// A tool name as the index compares it: its length and its first and
/// last eight bytes kept in place, so that a name of 8 to 16 bytes (most
/// tool names) is compared without reading it (nor calling `memcmp`).
struct Name {
    len: usize,
    first: Option<[u8; 8]>,
    last: Option<[u8; 8]>,
    full: Box<str>,
}

impl Name {
    fn new(name: &str) -> Self {
        let bytes = name.as_bytes();
        Name {
            len: bytes.len(),
            first: word(bytes, 0),
            last: bytes.len().checked_sub(8).and_then(|at| word(bytes, at)),
            full: name.into(),
        }
    }

    /// Whether `tool` is this name.
    #[inline(always)]
    fn is(&self, tool: &str) -> bool {
        let bytes = tool.as_bytes();
        if bytes.len() != self.len {
            return false;
        }
        if self.len < 8 {
            return *self.full == *tool;
        }
        word(bytes, 0) == self.first
            && word(bytes, self.len - 8) == self.last
            && (self.len <= 16 || *self.full == *tool)
    }
}

/// The eight bytes of `bytes` from `at`, if there are eight.
#[inline(always)]
fn word(bytes: &[u8], at: usize) -> Option<[u8; 8]> {
    bytes.get(at..).and_then(<[u8]>::first_chunk::<8>).copied()
}

impl<P: Point> FlatIndex<P> {
    /// The index of `by_tool`.
    fn build(by_tool: &HashTrieMapSync<Box<str>, Entries<P>, FxBuildHasher>) -> Self {
        let size = (by_tool.size() * 2).next_power_of_two().max(2);
        let shift = 64 - size.trailing_zeros();
        let mut slots: Vec<Slot<P>> = std::iter::repeat_with(|| Slot {
            first: None,
            more: Vec::new(),
        })
        .take(size)
        .collect();
        for (tool, list) in by_tool.iter() {
            let key = crate::name::tool_key(tool);
            let slot = &mut slots[(key >> shift) as usize];
            let entry = (key, Name::new(tool), list.clone());
            match slot.first {
                None => slot.first = Some(entry),
                Some(_) => slot.more.push(entry),
            }
        }
        FlatIndex {
            shift,
            slots: slots.into_boxed_slice(),
        }
    }

    /// The hooks filtered to `tool`, whose hash is `key`.
    #[inline(always)]
    fn get(&self, tool: &str, key: u64) -> Option<&Entries<P>> {
        let slot = self.slots.get((key >> self.shift) as usize)?;
        let (first_key, name, hooks) = slot.first.as_ref()?;
        if *first_key == key && name.is(tool) {
            return Some(hooks);
        }
        slot.more
            .iter()
            .find(|(k, name, _)| *k == key && name.is(tool))
            .map(|(_, _, hooks)| hooks)
    }
}

/// One point's hooks: all of them in rank order, and an index from tool
/// name to the hooks filtered to that tool, so that a dispatch meets only
/// the hooks that can run for its tool.
pub(crate) struct Chain<P: Point> {
    all: Entries<P>,
    /// Hooks without a tool filter, in rank order.
    unfiltered: Entries<P>,
    /// For each tool some filter names: the hooks filtered to it, in rank
    /// order.
    by_tool: HashTrieMapSync<Box<str>, Entries<P>, FxBuildHasher>,
    /// `by_tool` as a flat hash map, built by the first dispatch that needs
    /// it, in place (a dispatch reaches it without a hop): a lookup in it
    /// is a few nanoseconds faster than in the persistent map, and
    /// registering stays O(1) (a copy starts without it, and builds it
    /// lazily).
    flat: OnceLock<FlatIndex<P>>,
    /// Whether some hook of the chain is `async` (a dispatch that can
    /// await takes the awaiting walk only then).
    has_async: bool,
}

impl<P: Point> Clone for Chain<P> {
    fn clone(&self) -> Self {
        Chain {
            all: self.all.clone(),
            unfiltered: self.unfiltered.clone(),
            by_tool: self.by_tool.clone(),
            flat: OnceLock::new(),
            has_async: self.has_async,
        }
    }
}

impl<P: Point> Default for Chain<P> {
    fn default() -> Self {
        Chain {
            all: AppendList::new(),
            unfiltered: AppendList::new(),
            // Small nodes: a registration copies one node per level of the trie.
            by_tool: HashTrieMapSync::new_with_hasher_and_degree_and_ptr_kind(FxBuildHasher, 16),
            flat: OnceLock::new(),
            has_async: false,
        }
    }
}

impl<P: Point> Chain<P> {
    /// A chain of these entries, sorted by rank.
    pub(crate) fn from_entries(mut entries: Vec<Arc<HookEntry<P>>>) -> Self {
        entries.sort_by_key(|entry| entry.rank);
        let mut chain = Chain::default();
        for entry in entries {
            chain.append(entry);
        }
        chain
    }

    /// Adds `entry` in its place by rank (registration order): O(1) when
    /// it ranks last (every registration at run time), a rebuild
    /// otherwise. A crew's hooks (origin [`HookOrigin::Crew`]) run by
    /// their `order` among themselves, then by rank: a crew hook placed
    /// before crew hooks registered earlier takes the first of their
    /// places (ranks), and each of them moves one place on. The chain's
    /// set of ranks stays the same, so that a crew's hooks keep their
    /// slots among the global hooks in a merged walk (SPEC rule 3) while
    /// running in `order` among themselves (policies and `#[crew_base]`
    /// methods included).
    pub(crate) fn insert(&mut self, entry: Arc<HookEntry<P>>) {
        let is_crew = |entry: &HookEntry<P>| matches!(entry.info.origin, HookOrigin::Crew { .. });
        let reorders = is_crew(&entry)
            && self
                .all
                .iter()
                .any(|earlier| is_crew(earlier) && earlier.info.order > entry.info.order);
        if reorders {
            let mut entries = self.entries();
            entries.push(entry);
            let (crew, others): (Vec<_>, Vec<_>) =
                entries.into_iter().partition(|entry| is_crew(entry));
            let mut ranks: Vec<u64> = crew.iter().map(|entry| entry.rank).collect();
            ranks.sort_unstable();
            let mut crew = crew;
            crew.sort_by_key(|entry| (entry.info.order, entry.rank));
            let mut entries = others;
            entries.extend(crew.into_iter().zip(ranks).map(|(entry, rank)| {
                if entry.rank == rank {
                    entry
                } else {
                    Arc::new(entry.with_rank(rank))
                }
            }));
            *self = Chain::from_entries(entries);
            return;
        }
        match self.all.last() {
            Some(last) if last.rank > entry.rank => {
                let mut entries = self.entries();
                entries.push(entry);
                *self = Chain::from_entries(entries);
            }
            _ => self.append(entry),
        }
    }

    fn append(&mut self, entry: Arc<HookEntry<P>>) {
        self.has_async |= entry.call.is_async();
        if entry.info.tools.is_empty() {
            self.unfiltered.push(Arc::clone(&entry));
        } else {
            for tool in &entry.info.tools {
                let mut list = self
                    .by_tool
                    .get(tool.as_str())
                    .cloned()
                    .unwrap_or_else(AppendList::new);
                list.push(Arc::clone(&entry));
                self.by_tool.insert_mut(tool.as_str().into(), list);
            }
            // This version's index differs from the one it was copied from.
            self.flat = OnceLock::new();
        }
        self.all.push(entry);
    }

    /// Every entry, in rank order.
    pub(crate) fn entries(&self) -> Vec<Arc<HookEntry<P>>> {
        self.all.iter().cloned().collect()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &HookEntry<P>> {
        self.all.iter().map(|entry| &**entry)
    }

    pub(crate) fn len(&self) -> usize {
        self.all.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.all.is_empty()
    }

    /// Whether some hook of the chain is `async`.
    #[inline]
    pub(crate) fn has_async(&self) -> bool {
        self.has_async
    }

    /// The hooks whose tool filter admits `tool` (every hook where the
    /// point has no tool), in rank order.
    #[inline(always)]
    pub(crate) fn candidates(&self, tool: Option<&str>, key: u64) -> Candidates<'_, P> {
        let filtered = match tool {
            Some(tool) if !self.by_tool.is_empty() => self.flat_index().get(tool, key),
            _ => None,
        };
        match filtered {
            None => Candidates::One(self.unfiltered.iter()),
            // Only tool-filtered hooks can run: walk them directly.
            Some(filtered) if self.unfiltered.is_empty() => Candidates::One(filtered.iter()),
            Some(filtered) => {
                Candidates::Two(MergeByRank::new(self.unfiltered.iter(), filtered.iter()))
            }
        }
    }

    #[inline]
    fn flat_index(&self) -> &FlatIndex<P> {
        self.flat.get_or_init(|| FlatIndex::build(&self.by_tool))
    }
}

type ListIter<'c, P> = Iter<'c, Arc<HookEntry<P>>>;

/// The candidate hooks of one chain, in rank order.
pub(crate) enum Candidates<'c, P: Point> {
    One(ListIter<'c, P>),
    Two(MergeByRank<ListIter<'c, P>, ListIter<'c, P>>),
}

impl<'c, P: Point> Iterator for Candidates<'c, P> {
    type Item = &'c Arc<HookEntry<P>>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Candidates::One(list) => list.next(),
            Candidates::Two(merged) => merged.next(),
        }
    }
}

/// Two iterators of entries in rank order, merged into one.
pub(crate) struct MergeByRank<A: Iterator, B: Iterator> {
    a: std::iter::Peekable<A>,
    b: std::iter::Peekable<B>,
}

impl<A: Iterator, B: Iterator> MergeByRank<A, B> {
    pub(crate) fn new(a: A, b: B) -> Self {
        MergeByRank {
            a: a.peekable(),
            b: b.peekable(),
        }
    }
}

impl<'c, P: Point, A, B> Iterator for MergeByRank<A, B>
where
    A: Iterator<Item = &'c Arc<HookEntry<P>>>,
    B: Iterator<Item = &'c Arc<HookEntry<P>>>,
{
    type Item = &'c Arc<HookEntry<P>>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let take_a = match (self.a.peek(), self.b.peek()) {
            (None, None) => return None,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(a), Some(b)) => a.rank <= b.rank,
        };
        if take_a { self.a.next() } else { self.b.next() }
    }
}

#[cfg(test)]
mod tests {
    use super::{AppendList, Name};

    #[test]
    fn a_name_is_only_itself_at_every_length_and_every_byte() {
        for len in 0..40 {
            let name: String = (0..len)
                .map(|i| char::from(b'a' + (i % 26) as u8))
                .collect();
            let kept = Name::new(&name);
            assert!(kept.is(&name), "{name}");
            // One byte changed, wherever it is, is another name.
            for at in 0..len {
                let mut other = name.clone().into_bytes();
                other[at] = b'_';
                let other = String::from_utf8(other).unwrap_or_default();
                assert!(!kept.is(&other), "{name} is not {other}");
            }
            // So is the name one byte longer or shorter.
            assert!(!kept.is(&format!("{name}x")));
            if let Some(shorter) = name.get(..len.saturating_sub(1)).filter(|_| len > 0) {
                assert!(!kept.is(shorter));
            }
        }
    }

    fn items(list: &AppendList<u32>) -> Vec<u32> {
        list.iter().copied().collect()
    }

    #[test]
    fn versions_keep_their_items() {
        let mut first = AppendList::new();
        first.push(1);
        let mut second = first.clone();
        second.push(2);
        let mut third = second.clone();
        third.push(3);
        // An older version extended again does not see or disturb the newer.
        let mut fork = first.clone();
        fork.push(9);
        assert_eq!(items(&first), [1]);
        assert_eq!(items(&second), [1, 2]);
        assert_eq!(items(&third), [1, 2, 3]);
        assert_eq!(items(&fork), [1, 9]);
    }

    #[test]
    fn many_pushes_keep_order() {
        let mut list = AppendList::new();
        for i in 0..1000 {
            list.push(i);
        }
        assert_eq!(items(&list), (0..1000).collect::<Vec<_>>());
        assert_eq!(list.len(), 1000);
    }
}
