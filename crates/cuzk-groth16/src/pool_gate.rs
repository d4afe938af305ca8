//! The order in which circuits given as parts take the rayon pool: first come, first
//! served, a few at a time ([`PoolGate`]). Without it, every partition the engine admits
//! puts its parts on the one shared pool at once and rayon interleaves them: the first
//! 32 GiB PoRep proof's ten partitions (18 challenges each, 16 threads) were synthesized
//! together in 13.4–19.6 s, so the GPU got its first partition after 21 s although one
//! partition alone takes about 1 s. Through the gate the pool works on the oldest
//! partition (and the next, in the first one's last round) and hands each to the GPU as
//! soon as it is done; the total work is the same.
//!
//! A caller asks for the width of one round of its parts ([`width`]); it is let in when it
//! is first in line and the holders' widths sum to less than the pool's threads. So 18
//! parts on 16 threads (two rounds of 9) run two partitions at a time, the second filling
//! the threads the first's last round leaves idle; 2 parts run eight at a time. Callers on
//! a rayon worker are never held (the pool would wait on itself): they run at once.
//!
//! A gate is a value, not a process-wide one: each [`crate::Synthesizer`] holds its own
//! and hands it to `sublayout::witness_parts`, so two engines in one process each order
//! their own partitions.

use parking_lot::{Condvar, Mutex};

/// A first-come-first-served gate in front of the rayon pool.
pub struct PoolGate {
    state: Mutex<Line>,
    turn: Condvar,
}

#[derive(Default)]
struct Line {
    /// The next ticket to hand out.
    next: u64,
    /// The ticket whose turn it is.
    serving: u64,
    /// Widths held by the callers let in.
    used: usize,
}

/// A caller's place on the pool, returned on drop.
#[must_use = "the place is given back when this is dropped"]
pub struct Place<'a> {
    gate: &'a PoolGate,
    width: usize,
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        if self.width == 0 {
            return;
        }
        let mut line = self.gate.state.lock();
        line.used -= self.width;
        drop(line);
        self.gate.turn.notify_all();
    }
}

/// The width of one round of `n_parts` parts on `threads` threads: the parts spread
/// evenly over the rounds they need (18 on 16: two rounds of 9).
pub fn width(n_parts: usize, threads: usize) -> usize {
    let threads = threads.max(1);
    let n = n_parts.max(1);
    let rounds = n.div_ceil(threads);
    n.div_ceil(rounds)
}

impl PoolGate {
    /// An empty gate.
    pub const fn new() -> PoolGate {
        PoolGate {
            state: Mutex::new(Line {
                next: 0,
                serving: 0,
                used: 0,
            }),
            turn: Condvar::new(),
        }
    }

    /// Waits for this caller's turn on a pool of `threads` threads and takes `width` of
    /// them. The first in line goes in while the holders' widths sum to less than
    /// `threads` (or nobody holds any), so one caller is never refused for being wide.
    pub fn enter(&self, width: usize, threads: usize) -> Place<'_> {
        let mut line = self.state.lock();
        let ticket = line.next;
        line.next += 1;
        while line.serving != ticket || (line.used > 0 && line.used >= threads) {
            self.turn.wait(&mut line);
        }
        line.serving += 1;
        line.used += width;
        drop(line);
        // The next in line may fit beside this one.
        self.turn.notify_all();
        Place { gate: self, width }
    }

    /// Takes a place for `n_parts` parts on the current rayon pool, in arrival order; at
    /// once (and holding nothing) on a rayon worker.
    pub fn enter_pool(&self, n_parts: usize) -> Place<'_> {
        if rayon::current_thread_index().is_some() {
            return Place {
                gate: self,
                width: 0,
            };
        }
        let threads = rayon::current_num_threads();
        self.enter(width(n_parts, threads), threads)
    }

    /// Widths held now (tests, status).
    pub fn used(&self) -> usize {
        self.state.lock().used
    }

    /// Callers waiting for their turn (tests, status).
    pub fn waiting(&self) -> u64 {
        let line = self.state.lock();
        line.next - line.serving
    }
}

impl Default for PoolGate {
    fn default() -> Self {
        PoolGate::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn a_round_spreads_the_parts_evenly() {
        assert_eq!(width(18, 16), 9);
        assert_eq!(width(16, 16), 16);
        assert_eq!(width(17, 16), 9);
        assert_eq!(width(2, 16), 2);
        assert_eq!(width(40, 16), 14);
        assert_eq!(width(1, 16), 1);
        assert_eq!(width(0, 0), 1);
        assert_eq!(width(5, 1), 1);
    }

    /// Callers go in in arrival order while the widths held stay under the pool's
    /// threads; a wide one goes in alone; leaving lets the next in.
    #[test]
    fn callers_go_in_in_arrival_order_within_the_threads() {
        let gate = Arc::new(PoolGate::new());
        let a = gate.enter(9, 16);
        let b = gate.enter(9, 16); // 9 < 16: beside the first
        assert_eq!(gate.used(), 18);
        // A third waits; a fourth, arriving later, waits behind it even though narrow.
        let order = Arc::new(Mutex::new(Vec::new()));
        let inside = Arc::new(AtomicUsize::new(0));
        let spawn = |name: &'static str, width: usize| {
            let (gate2, order, inside) = (gate.clone(), order.clone(), inside.clone());
            let before = gate.waiting();
            let handle = std::thread::spawn(move || {
                let place = gate2.enter(width, 16);
                order.lock().push(name);
                inside.fetch_add(1, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(20));
                drop(place);
            });
            // Let it take its ticket before the next one arrives.
            while gate.waiting() == before {
                std::thread::yield_now();
            }
            handle
        };
        let c = spawn("wide", 16);
        let d = spawn("narrow", 1);
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(inside.load(Ordering::SeqCst), 0, "both wait for the pool");
        drop(a);
        // 9 held, 9 < 16: the wide one goes in beside the second, then the narrow one waits
        // until the sum drops under 16.
        c.join().expect("wide");
        drop(b);
        d.join().expect("narrow");
        assert_eq!(*order.lock(), vec!["wide", "narrow"]);
        assert_eq!(gate.used(), 0);
        assert_eq!(gate.waiting(), 0);
    }

    /// On a rayon worker the gate holds nothing and never waits.
    #[test]
    fn a_rayon_worker_is_never_held() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .expect("pool");
        let gate = PoolGate::new();
        let width = pool.install(|| gate.enter_pool(1000).width);
        assert_eq!(width, 0);
    }
}
