//! [`ComputeToken`]: the per-device compute token, a fair FIFO (ticket) lock. Workers of one
//! device take tickets and are served strictly in ticket order, so no worker starves and
//! the order in which partitions reach the device is the order they left the queue.

use parking_lot::{Condvar, Mutex};

/// A fair FIFO lock guarding a device's compute streams.
#[derive(Default)]
pub struct ComputeToken {
    tickets: Mutex<Tickets>,
    turn: Condvar,
}

#[derive(Default)]
struct Tickets {
    next: u64,
    serving: u64,
}

/// Holding this means holding the token; dropping it passes the token on.
pub struct TokenGuard<'a> {
    token: &'a ComputeToken,
}

impl ComputeToken {
    /// A free token.
    pub fn new() -> Self {
        ComputeToken::default()
    }

    /// Blocks until every earlier caller has held and released the token, then holds it.
    pub fn acquire(&self) -> TokenGuard<'_> {
        let mut tickets = self.tickets.lock();
        let ticket = tickets.next;
        tickets.next += 1;
        while tickets.serving != ticket {
            self.turn.wait(&mut tickets);
        }
        TokenGuard { token: self }
    }

    /// Holds the token if it is free and nobody waits for it; otherwise takes no ticket and
    /// returns None (a caller with other work to do first, before it queues).
    pub fn try_acquire(&self) -> Option<TokenGuard<'_>> {
        let mut tickets = self.tickets.lock();
        if tickets.next != tickets.serving {
            return None;
        }
        tickets.next += 1;
        Some(TokenGuard { token: self })
    }

    /// Callers waiting for the token (not counting its holder).
    pub fn waiting(&self) -> u64 {
        let tickets = self.tickets.lock();
        tickets.next - tickets.serving - u64::from(tickets.next > tickets.serving)
    }
}

impl Drop for TokenGuard<'_> {
    fn drop(&mut self) {
        let mut tickets = self.token.tickets.lock();
        tickets.serving += 1;
        // Every waiter re-checks its ticket; only the next one proceeds.
        self.token.turn.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn token_serves_waiters_in_arrival_order() {
        let token = Arc::new(ComputeToken::new());
        let order = Arc::new(Mutex::new(Vec::new()));
        let held = token.acquire();
        let mut threads = Vec::new();
        for i in 0..4 {
            let (worker_token, order) = (token.clone(), order.clone());
            threads.push(std::thread::spawn(move || {
                let _guard = worker_token.acquire();
                order.lock().push(i);
            }));
            // Let thread i take its ticket before thread i + 1 starts.
            while token.waiting() < i + 1 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        drop(held);
        for t in threads {
            t.join().expect("worker thread");
        }
        assert_eq!(*order.lock(), vec![0, 1, 2, 3]);
    }

    #[test]
    fn try_acquire_takes_only_a_free_token() {
        let token = ComputeToken::new();
        let held = token.try_acquire().expect("a free token");
        assert!(token.try_acquire().is_none(), "held");
        assert_eq!(token.waiting(), 0, "a failed try takes no ticket");
        drop(held);
        let again = token.try_acquire().expect("free again");
        drop(again);
        // A blocking caller after a try-holder is served next.
        let _guard = token.acquire();
        assert!(token.try_acquire().is_none());
    }
}
