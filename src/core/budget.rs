//! Upstream budgets: at most `max_in_flight` requests at an upstream at once; the others
//! wait their turn, first come first served.
//!
//! ```text
//! max_in_flight 2:   a b c d arrive together
//! in flight          a b          (c, d wait in this order)
//! a is answered      b c          (its slot goes to c, never to a later arrival)
//! d gives up         b c          (a waiter that leaves frees nothing and loses its place)
//! ```
//!
//! The state machine is pure: the caller decides how long a waiter may wait (and calls
//! [`InFlight::leave`] when it gives up) and when a slot comes back ([`InFlight::release`]).

use alloc::collections::VecDeque;

/// A waiter's place in the queue.
pub type Ticket = u64;

/// The answer to [`InFlight::acquire`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acquire {
    /// A slot is held now.
    Granted,
    /// No slot is free: wait for [`InFlight::release`] to hand this ticket one.
    Queued(Ticket),
    /// No slot is free and the queue is full: answer at once.
    Refused,
}

/// The slots of one upstream budget.
#[derive(Clone, Debug)]
pub struct InFlight {
    max_in_flight: u32,
    max_queue: usize,
    in_flight: u32,
    queue: VecDeque<Ticket>,
    next: Ticket,
}

impl InFlight {
    /// `max_in_flight` slots (at least 1) and room for `max_queue` waiters.
    pub fn new(max_in_flight: u32, max_queue: usize) -> Self {
        InFlight { max_in_flight: max_in_flight.max(1), max_queue, in_flight: 0, queue: VecDeque::new(), next: 1 }
    }

    /// Take a slot, or a place in the queue. A new arrival never overtakes a waiter.
    pub fn acquire(&mut self) -> Acquire {
        if self.in_flight < self.max_in_flight && self.queue.is_empty() {
            self.in_flight += 1;
            return Acquire::Granted;
        }
        if self.queue.len() >= self.max_queue {
            return Acquire::Refused;
        }
        let ticket = self.next;
        self.next += 1;
        self.queue.push_back(ticket);
        Acquire::Queued(ticket)
    }

    /// A slot comes back. Returns the waiter that holds it now, if any waited.
    pub fn release(&mut self) -> Option<Ticket> {
        match self.queue.pop_front() {
            Some(next) => Some(next),
            None => {
                self.in_flight = self.in_flight.saturating_sub(1);
                None
            }
        }
    }

    /// A waiter gives up. `true` if it was still waiting (it holds nothing now); `false` if
    /// it already holds a slot (handed over by [`InFlight::release`]) or never waited.
    pub fn leave(&mut self, ticket: Ticket) -> bool {
        match self.queue.iter().position(|&t| t == ticket) {
            Some(at) => {
                self.queue.remove(at);
                true
            }
            None => false,
        }
    }

    /// How many slots are held.
    pub fn in_flight(&self) -> u32 {
        self.in_flight
    }

    /// How many requests wait.
    pub fn waiting(&self) -> usize {
        self.queue.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_freed_slot_goes_to_the_first_waiter_never_to_a_later_arrival() {
        let mut slots = InFlight::new(2, 10);
        assert_eq!(slots.acquire(), Acquire::Granted);
        assert_eq!(slots.acquire(), Acquire::Granted);
        let Acquire::Queued(c) = slots.acquire() else { panic!("full") };
        let Acquire::Queued(d) = slots.acquire() else { panic!("full") };
        assert_eq!(slots.release(), Some(c));
        assert_eq!(slots.in_flight(), 2, "the slot passed to c without being freed");
        assert!(matches!(slots.acquire(), Acquire::Queued(_)), "a new arrival queues behind d");
        assert!(slots.leave(d));
        assert!(!slots.leave(d), "gone already");
        assert!(!slots.leave(c), "c holds a slot: leaving the queue is not its way out");
    }

    #[test]
    fn a_full_queue_refuses_at_once_and_the_last_release_frees_the_slot() {
        let mut slots = InFlight::new(1, 1);
        assert_eq!(slots.acquire(), Acquire::Granted);
        let Acquire::Queued(b) = slots.acquire() else { panic!("room for one") };
        assert_eq!(slots.acquire(), Acquire::Refused);
        assert_eq!(slots.release(), Some(b));
        assert_eq!(slots.release(), None);
        assert_eq!((slots.in_flight(), slots.waiting()), (0, 0));
        assert_eq!(slots.acquire(), Acquire::Granted);
    }
}
