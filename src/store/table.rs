//! The slot table: what each slot (`NAME.0` .. `NAME.K`) holds and where
//! its file is, as read from the files (see `slots`) and kept up to date
//! by what the run writes; and how a generation is chosen:
//!
//! - a commit's number is one past every generation in the store, damaged
//!   ones included (`next_number`), and it goes to an empty slot, else to
//!   one holding no intact generation, else replaces the oldest
//!   (`next_slot`): never the newest intact generation, unless `--keep 0`;
//! - a restart takes the newest generation that verifies (see `verify`),
//!   walking down from the newest (`below`).
//!
//! Every slot there is (up to MAX_KEEP) is read, so `--keep` may change
//! between runs. Nothing here allocates after `Table::new`.

use rustix::io::Errno;

/// The most older generations `--keep` may ask for.
pub const MAX_KEEP: u32 = 64;
const ALL: usize = MAX_KEEP as usize + 1;

/// A set of slots, by number (0 to MAX_KEEP).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlotSet(u128);

impl SlotSet {
    pub fn insert(&mut self, slot: u32) {
        self.0 |= 1 << slot;
    }

    pub fn remove(&mut self, slot: u32) {
        self.0 &= !(1 << slot);
    }

    pub fn contains(self, slot: u32) -> bool {
        self.0 & (1 << slot) != 0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    pub fn union(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    pub fn intersection(self, other: Self) -> Self {
        Self(self.0 & other.0)
    }

    /// Its slots, in order.
    pub fn iter(self) -> impl Iterator<Item = u32> {
        let mut left = self.0;
        core::iter::from_fn(move || {
            let slot = left.trailing_zeros();
            left &= left.wrapping_sub(1);
            (slot < 128).then_some(slot)
        })
    }
}

/// What one slot file holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotState {
    Absent,
    Empty,
    /// Cut off, or not an archive ckptrun wrote.
    Bad,
    /// Its file could not be read (an I/O error): not damage, see
    /// `slots::unread`.
    Unreadable(Errno),
    Generation(u64),
}

/// Where a slot's file is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// At the top of the sandbox, where HTCondor uploads it when it has
    /// changed.
    Top,
    /// In `.NAME/older`, which HTCondor never uploads.
    Older,
}

pub struct Table {
    /// Slots in use: keep + 1.
    count: u32,
    /// Boxed (made before the job starts): a kilobyte less in every frame
    /// holding a store.
    states: Box<[SlotState; ALL]>,
    /// The slots whose file is in `.NAME/older`.
    older: SlotSet,
    /// Slots found damaged at this start: the next commits replace them
    /// first.
    damaged: SlotSet,
}

impl Table {
    /// The table of a store with `keep` older generations, all absent.
    pub fn new(keep: u32) -> Self {
        Self {
            count: keep + 1,
            states: Box::new([SlotState::Absent; ALL]),
            older: SlotSet::default(),
            damaged: SlotSet::default(),
        }
    }

    /// Slots in use: keep + 1.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// Every slot absent, before the files are read again.
    pub fn clear(&mut self) {
        *self.states = [SlotState::Absent; ALL];
        self.older = SlotSet::default();
    }

    pub fn set(&mut self, slot: u32, state: SlotState, place: Place) {
        self.states[slot as usize] = state;
        self.moved(slot, place);
    }

    pub fn state(&self, slot: u32) -> SlotState {
        self.states[slot as usize]
    }

    pub fn place(&self, slot: u32) -> Place {
        match self.older.contains(slot) {
            true => Place::Older,
            false => Place::Top,
        }
    }

    /// Slot `slot`'s file is now in `place`.
    pub fn moved(&mut self, slot: u32, place: Place) {
        match place {
            Place::Top => self.older.remove(slot),
            Place::Older => self.older.insert(slot),
        }
    }

    /// The slots whose file is in `place` and holds something (a
    /// generation, or nothing if `empty_too`).
    pub fn in_place(&self, place: Place, empty_too: bool) -> SlotSet {
        let mut set = SlotSet::default();
        for (slot, s) in (0u32..).zip(self.states.iter()) {
            let holds = match s {
                SlotState::Absent => false,
                SlotState::Empty => empty_too,
                SlotState::Bad | SlotState::Unreadable(_) | SlotState::Generation(_) => true,
            };
            if holds && self.place(slot) == place {
                set.insert(slot);
            }
        }
        set
    }

    fn generations(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        (0u32..)
            .zip(self.states.iter())
            .filter_map(|(slot, s)| match s {
                SlotState::Generation(g) => Some((*g, slot)),
                _ => None,
            })
    }

    pub fn newest(&self) -> Option<u64> {
        self.generations().map(|(g, _)| g).max()
    }

    /// The slot holding generation `g`.
    pub fn find(&self, g: u64) -> Option<u32> {
        self.generations().find(|&(n, _)| n == g).map(|(_, s)| s)
    }

    /// The newest generation older than `g` (any, with `None`), and its
    /// slot.
    pub fn below(&self, g: Option<u64>) -> Option<(u64, u32)> {
        self.generations()
            .filter(|&(n, _)| g.is_none_or(|g| n < g))
            .max_by_key(|&(n, _)| n)
    }

    /// The newest generation not found damaged, and its slot.
    pub fn newest_intact(&self) -> Option<(u64, u32)> {
        self.generations()
            .filter(|&(_, s)| !self.damaged.contains(s))
            .max_by_key(|&(n, _)| n)
    }

    /// The oldest generation that is not the newest intact one (damaged
    /// ones first), and its slot: what a commit short of room removes.
    pub fn spare(&self) -> Option<(u64, u32)> {
        let newest_intact = self.newest_intact();
        self.generations()
            .filter(|&found| Some(found) != newest_intact)
            .min_by_key(|&(n, s)| (!self.damaged.contains(s), n))
    }

    /// The slots whose file is not a whole archive.
    pub fn bad(&self) -> SlotSet {
        let mut bad = SlotSet::default();
        for (slot, s) in (0u32..).zip(self.states.iter()) {
            if *s == SlotState::Bad {
                bad.insert(slot);
            }
        }
        bad
    }

    /// A slot whose file could not be read, and the error, if any.
    pub fn unreadable(&self) -> Option<(u32, Errno)> {
        (0u32..)
            .zip(self.states.iter())
            .find_map(|(slot, s)| match s {
                SlotState::Unreadable(e) => Some((slot, *e)),
                _ => None,
            })
    }

    /// The number the next generation gets: past every generation in the
    /// store, damaged ones included.
    pub fn next_number(&self) -> u64 {
        self.newest().map_or(1, |n| n + 1)
    }

    /// The slot the next generation goes to, among this `--keep`'s: an
    /// empty one, else one that holds no intact generation, else the
    /// oldest. Never the newest intact generation's, unless `--keep 0`.
    pub fn next_slot(&self) -> u32 {
        let state = |s: u32| self.states[s as usize];
        let ours = || 0..self.count;
        ours()
            .find(|&s| matches!(state(s), SlotState::Absent | SlotState::Empty))
            .or_else(|| ours().find(|&s| state(s) == SlotState::Bad || self.damaged.contains(s)))
            .or_else(|| {
                ours().min_by_key(|&s| match state(s) {
                    SlotState::Generation(g) => g,
                    _ => 0,
                })
            })
            .unwrap_or(0)
    }

    pub fn damaged(&self) -> SlotSet {
        self.damaged
    }

    pub fn mark_damaged(&mut self, slots: SlotSet) {
        self.damaged = self.damaged.union(slots);
    }

    /// The damaged slots were set aside: none is left.
    pub fn forget_damaged(&mut self) {
        for slot in self.damaged.iter() {
            self.states[slot as usize] = SlotState::Absent;
        }
        self.damaged = SlotSet::default();
    }

    /// Generation `g` was renamed into slot `slot`, at the top.
    pub fn committed(&mut self, slot: u32, g: u64) {
        self.set(slot, SlotState::Generation(g), Place::Top);
        self.damaged.remove(slot);
    }

    /// Slot `slot`'s file was removed.
    pub fn removed(&mut self, slot: u32) {
        self.set(slot, SlotState::Absent, Place::Top);
        self.damaged.remove(slot);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_set_holds_what_went_in() {
        let mut set = SlotSet::default();
        assert!(set.is_empty());
        set.insert(0);
        set.insert(64);
        set.insert(7);
        set.remove(7);
        assert_eq!(set.iter().collect::<Vec<_>>(), [0, 64]);
        assert!(set.contains(64) && !set.contains(7));
    }

    #[test]
    fn a_commit_replaces_the_oldest_and_room_comes_from_the_oldest_not_the_newest_intact() {
        let mut t = Table::new(2);
        t.set(0, SlotState::Generation(5), Place::Top);
        t.set(1, SlotState::Generation(3), Place::Older);
        t.set(2, SlotState::Generation(4), Place::Older);
        assert_eq!((t.next_number(), t.next_slot()), (6, 1));
        assert_eq!(t.spare(), Some((3, 1)));
        let mut damaged = SlotSet::default();
        damaged.insert(0);
        t.mark_damaged(damaged);
        assert_eq!(t.next_slot(), 0, "a damaged slot goes first");
        assert_eq!(t.spare(), Some((5, 0)), "a damaged one is spared first");
        t.removed(0);
        t.removed(1);
        assert_eq!(t.spare(), None, "the newest intact is never spare");
        assert_eq!(
            t.in_place(Place::Older, true).iter().collect::<Vec<_>>(),
            [2]
        );
    }
}
