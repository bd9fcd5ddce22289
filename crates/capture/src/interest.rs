//! The set of event types that someone (a rule, the state engine) needs.

use std::fmt;

use vigil_event::{table, EventType};

/// A condition on one argument register that a kernel-side filter can decide: the low 32
/// bits of argument `arg` (0-based), masked with `mask`, equal one of `values`. Exact for
/// arguments the kernel reads as 32-bit integers: descriptors (`dup2(_, newfd ∈ {0,1,2})`,
/// `mask` all ones) and open flags (the access mode: `flags & 3 ∈ {1, 2}` for a write).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgIn {
    pub arg: u8,
    pub mask: u32,
    pub values: Vec<u32>,
}

impl ArgIn {
    /// `args[arg]`'s low 32 bits equal one of `values`.
    pub fn equal(arg: u8, values: Vec<u32>) -> ArgIn {
        ArgIn {
            arg,
            mask: u32::MAX,
            values,
        }
    }
}

impl fmt::Display for ArgIn {
    /// `arg1=0|1|2`, `arg2&0x3=1|2`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "arg{}", self.arg)?;
        if self.mask != u32::MAX {
            write!(f, "&{:#x}", self.mask)?;
        }
        for (i, v) in self.values.iter().enumerate() {
            write!(f, "{}{v}", if i == 0 { "=" } else { "|" })?;
        }
        Ok(())
    }
}

/// A set of event types: one bit per [`EventType`] id of this build's table.
///
/// The compiled ruleset and the state engine build it; drivers turn it into what their kernel
/// side understands ([`InterestSet::to_syscall_numbers`]). Non-syscall events (`procexit`) have
/// no syscall number: a driver that tracks processes always reports them.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct InterestSet {
    /// Always `ceil(table::events().len() / 64)` words, so equal sets compare equal.
    words: Vec<u64>,
}

fn n_words() -> usize {
    table::events().len().div_ceil(64)
}

impl InterestSet {
    /// The empty set.
    pub fn new() -> InterestSet {
        InterestSet {
            words: vec![0; n_words()],
        }
    }

    /// Every event type of this build.
    pub fn all() -> InterestSet {
        let mut set = InterestSet::new();
        let n = table::events().len();
        for (i, word) in set.words.iter_mut().enumerate() {
            let bits = n.saturating_sub(i * 64).min(64);
            *word = if bits == 64 {
                u64::MAX
            } else {
                (1 << bits) - 1
            };
        }
        set
    }

    fn slot(etype: EventType) -> (usize, u64) {
        let id = usize::from(etype.0);
        (id / 64, 1 << (id % 64))
    }

    /// Adds `etype`; `true` if it was not there yet. Ids beyond this build's table are ignored
    /// (and `false` returned): no such event can occur.
    pub fn insert(&mut self, etype: EventType) -> bool {
        let (word, bit) = Self::slot(etype);
        match self.words.get_mut(word) {
            Some(w) if usize::from(etype.0) < table::events().len() => {
                let added = *w & bit == 0;
                *w |= bit;
                added
            }
            _ => false,
        }
    }

    /// Removes `etype`; `true` if it was there.
    pub fn remove(&mut self, etype: EventType) -> bool {
        let (word, bit) = Self::slot(etype);
        match self.words.get_mut(word) {
            Some(w) => {
                let present = *w & bit != 0;
                *w &= !bit;
                present
            }
            None => false,
        }
    }

    /// Whether `etype` is in the set.
    pub fn contains(&self, etype: EventType) -> bool {
        let (word, bit) = Self::slot(etype);
        self.words.get(word).is_some_and(|w| w & bit != 0)
    }

    /// Adds every type of `other`.
    pub fn union_with(&mut self, other: &InterestSet) {
        for (w, o) in self.words.iter_mut().zip(&other.words) {
            *w |= o;
        }
    }

    /// The types in the set, by ascending id.
    pub fn iter(&self) -> impl Iterator<Item = EventType> + '_ {
        self.words.iter().enumerate().flat_map(|(i, &word)| {
            let mut rest = word;
            std::iter::from_fn(move || {
                if rest == 0 {
                    return None;
                }
                let bit = rest.trailing_zeros() as usize;
                rest &= rest - 1;
                Some(EventType((i * 64 + bit) as u16))
            })
        })
    }

    /// How many types are in the set.
    pub fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|w| *w == 0)
    }

    /// Whether every event type of this build is in the set.
    pub fn is_all(&self) -> bool {
        *self == InterestSet::all()
    }

    /// The x86-64 syscall numbers of the syscall event types in the set, ascending.
    pub fn to_syscall_numbers(&self) -> Vec<u16> {
        let mut numbers: Vec<u16> = self.iter().filter_map(|t| t.spec().nr).collect();
        numbers.sort_unstable();
        numbers.dedup();
        numbers
    }
}

impl Default for InterestSet {
    fn default() -> InterestSet {
        InterestSet::new()
    }
}

impl fmt::Debug for InterestSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set()
            .entries(self.iter().map(EventType::name))
            .finish()
    }
}

impl FromIterator<EventType> for InterestSet {
    fn from_iter<I: IntoIterator<Item = EventType>>(iter: I) -> InterestSet {
        let mut set = InterestSet::new();
        set.extend(iter);
        set
    }
}

impl Extend<EventType> for InterestSet {
    fn extend<I: IntoIterator<Item = EventType>>(&mut self, iter: I) {
        for etype in iter {
            self.insert(etype);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(name: &str) -> EventType {
        table::by_name(name).unwrap_or_else(|| panic!("no event type {name}"))
    }

    #[test]
    fn insert_contains_remove() {
        let mut set = InterestSet::new();
        assert!(set.is_empty());
        assert!(set.insert(t("openat")));
        assert!(!set.insert(t("openat")), "second insert adds nothing");
        assert!(set.insert(t("execve")));
        assert!(set.contains(t("openat")));
        assert!(!set.contains(t("connect")));
        assert_eq!(set.len(), 2);
        assert!(set.remove(t("openat")));
        assert!(!set.remove(t("openat")));
        assert_eq!(set.iter().collect::<Vec<_>>(), vec![t("execve")]);
        assert!(
            !set.insert(EventType(u16::MAX)),
            "ids beyond the table are ignored"
        );
        assert!(!set.contains(EventType(u16::MAX)));
        assert!(!set.remove(EventType(u16::MAX)));
    }

    #[test]
    fn all_holds_every_type_and_nothing_more() {
        let all = InterestSet::all();
        let n = table::events().len();
        assert_eq!(all.len(), n);
        assert!(all.is_all());
        let ids: Vec<u16> = all.iter().map(|t| t.0).collect();
        assert_eq!(ids, (0..n as u16).collect::<Vec<_>>());
        let rebuilt: InterestSet = (0..n as u16).map(EventType).collect();
        assert_eq!(rebuilt, all);
        assert!(!InterestSet::new().is_all());
    }

    #[test]
    fn iterates_in_id_order_across_words() {
        let n = table::events().len() as u16;
        let picks = [0, 1, 63, 64, 65, 127, 128, n - 1];
        let set: InterestSet = picks.iter().map(|&id| EventType(id)).collect();
        let mut expected: Vec<u16> = picks.to_vec();
        expected.sort_unstable();
        expected.dedup();
        assert_eq!(set.iter().map(|t| t.0).collect::<Vec<_>>(), expected);
        assert_eq!(set.len(), expected.len());
    }

    #[test]
    fn syscall_numbers_skip_non_syscall_events() {
        let set: InterestSet = [t("openat"), t("read"), t("procexit"), t("execve")]
            .into_iter()
            .collect();
        assert_eq!(set.to_syscall_numbers(), vec![0, 59, 257]);
        let all = InterestSet::all().to_syscall_numbers();
        let syscalls = table::events().iter().filter(|e| e.nr.is_some()).count();
        assert_eq!(all.len(), syscalls, "every syscall type, once");
        assert!(all.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn union_and_debug() {
        let mut a: InterestSet = [t("openat")].into_iter().collect();
        let b: InterestSet = [t("connect")].into_iter().collect();
        a.union_with(&b);
        assert_eq!(a.len(), 2);
        assert_eq!(format!("{:?}", a), "{\"openat\", \"connect\"}");
    }
}
